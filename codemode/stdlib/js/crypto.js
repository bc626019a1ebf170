(host) => ({})
