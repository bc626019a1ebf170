// URL and URLSearchParams (URL Standard, https://url.spec.whatwg.org/).
// The basic URL parser is the spec's state machine, step for step; hosts that are not plain
// ASCII go through UTS #46 in the internal `idna` module, loaded only when such a host appears.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const fromCodePoint = String.fromCodePoint;
  const toUSV = (v) => String(v).toWellFormed();
  let idna = null;
  const domainToASCIIUnicode = (domain) => {
    if (idna === null) idna = host.require('idna')[INTERNAL];
    return idna.domainToASCII(domain);
  };

  // ---- percent-encoding ---------------------------------------------------------------------

  const makeSet = (base, extra) => {
    const set = new Uint8Array(128);
    if (base) set.set(base);
    else for (let c = 0; c < 0x20; c++) set[c] = 1;
    if (!base) set[0x7f] = 1;
    for (const ch of extra) set[ch.charCodeAt(0)] = 1;
    return set;
  };
  const C0_SET = makeSet(null, '');
  const FRAGMENT_SET = makeSet(C0_SET, ' "<>`');
  const QUERY_SET = makeSet(C0_SET, ' "#<>');
  const SPECIAL_QUERY_SET = makeSet(QUERY_SET, "'");
  const PATH_SET = makeSet(QUERY_SET, '?^`{}');
  const USERINFO_SET = makeSet(PATH_SET, '/:;=@[\\]^|');
  const COMPONENT_SET = makeSet(USERINFO_SET, '$%&+,');
  const FORM_SET = makeSet(COMPONENT_SET, "!'()~");

  const HEX = [];
  for (let i = 0; i < 256; i++) HEX.push('%' + (i < 16 ? '0' : '') + i.toString(16).toUpperCase());

  function encodeCodePoint(cp, set) {
    if (cp < 0x80) return set[cp] ? HEX[cp] : String.fromCharCode(cp);
    if (cp < 0x800) return HEX[0xc0 | (cp >> 6)] + HEX[0x80 | (cp & 63)];
    if (cp < 0x10000) return HEX[0xe0 | (cp >> 12)] + HEX[0x80 | ((cp >> 6) & 63)] + HEX[0x80 | (cp & 63)];
    return HEX[0xf0 | (cp >> 18)] + HEX[0x80 | ((cp >> 12) & 63)] + HEX[0x80 | ((cp >> 6) & 63)] + HEX[0x80 | (cp & 63)];
  }
  function percentEncodeString(s, set, spaceAsPlus = false) {
    let out = '';
    for (let i = 0; i < s.length; i++) {
      let cp = s.charCodeAt(i);
      if (cp < 0x80) {
        if (spaceAsPlus && cp === 0x20) out += '+';
        else out += set[cp] ? HEX[cp] : s[i];
        continue;
      }
      if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < s.length) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) { cp = 0x10000 + ((cp - 0xd800) << 10) + (d - 0xdc00); i++; }
      }
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
      out += encodeCodePoint(cp, set);
    }
    return out;
  }

  const hexVal = (c) => (c >= 48 && c <= 57 ? c - 48 : c >= 65 && c <= 70 ? c - 55 : c >= 97 && c <= 102 ? c - 87 : -1);
  // Percent-decode a string's UTF-8 bytes; returns a Uint8Array.
  function percentDecode(s) {
    const enc = host.require('encoding')[INTERNAL];
    const bytes = enc.utf8Encode(s);
    const out = new Uint8Array(bytes.length);
    let o = 0;
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i];
      if (b === 0x25 && i + 2 < bytes.length) {
        const h = hexVal(bytes[i + 1]), l = hexVal(bytes[i + 2]);
        if (h >= 0 && l >= 0) { out[o++] = (h << 4) | l; i += 2; continue; }
      }
      out[o++] = b;
    }
    return out.subarray(0, o);
  }
  const utf8DecodeNoBOM = (bytes) => host.require('encoding')[INTERNAL].utf8DecodeNoBOM(bytes);

  // ---- hosts --------------------------------------------------------------------------------

  const FORBIDDEN_HOST = new Set([0x00, 0x09, 0x0a, 0x0d, 0x20, 0x23, 0x2f, 0x3a, 0x3c, 0x3e, 0x3f, 0x40, 0x5b, 0x5c, 0x5d, 0x5e, 0x7c]);
  const isForbiddenDomain = (c) => FORBIDDEN_HOST.has(c) || c <= 0x1f || c === 0x25 || c === 0x7f;

  function parseIPv4Number(s) {
    if (s === '') return NaN;
    let radix = 10;
    if (s.length >= 2 && (s.startsWith('0x') || s.startsWith('0X'))) { radix = 16; s = s.slice(2); }
    else if (s.length >= 2 && s[0] === '0') { radix = 8; s = s.slice(1); }
    if (s === '') return 0;
    const re = radix === 10 ? /^[0-9]+$/ : radix === 16 ? /^[0-9a-fA-F]+$/ : /^[0-7]+$/;
    if (!re.test(s)) return NaN;
    return parseInt(s, radix);
  }
  function endsInANumber(s) {
    const parts = s.split('.');
    if (parts[parts.length - 1] === '') {
      if (parts.length === 1) return false;
      parts.pop();
    }
    const last = parts[parts.length - 1];
    if (last !== '' && /^[0-9]+$/.test(last)) return true;
    return !Number.isNaN(parseIPv4Number(last));
  }
  function parseIPv4(s) {
    const parts = s.split('.');
    if (parts[parts.length - 1] === '' && parts.length > 1) parts.pop();
    if (parts.length > 4) return null;
    const nums = [];
    for (const p of parts) {
      const n = parseIPv4Number(p);
      if (Number.isNaN(n)) return null;
      nums.push(n);
    }
    for (let i = 0; i < nums.length - 1; i++) if (nums[i] > 255) return null;
    if (nums[nums.length - 1] >= 256 ** (5 - nums.length)) return null;
    let ipv4 = nums[nums.length - 1];
    for (let i = 0; i < nums.length - 1; i++) ipv4 += nums[i] * 256 ** (3 - i);
    return ipv4;
  }
  const serializeIPv4 = (n) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

  function parseIPv6(input) {
    const address = [0, 0, 0, 0, 0, 0, 0, 0];
    let pieceIndex = 0, compress = null, p = 0;
    const cs = Array.from(input, (ch) => ch.codePointAt(0));
    const c = () => cs[p];
    const isHex = (x) => x !== undefined && hexVal(x) >= 0 && x < 128;
    const isDigit = (x) => x !== undefined && x >= 48 && x <= 57;
    if (c() === 0x3a) {
      if (cs[p + 1] !== 0x3a) return null;
      p += 2; pieceIndex++; compress = pieceIndex;
    }
    while (c() !== undefined) {
      if (pieceIndex === 8) return null;
      if (c() === 0x3a) {
        if (compress !== null) return null;
        p++; pieceIndex++; compress = pieceIndex;
        continue;
      }
      let value = 0, length = 0;
      while (length < 4 && isHex(c())) { value = value * 16 + hexVal(c()); p++; length++; }
      if (c() === 0x2e) {
        if (length === 0) return null;
        p -= length;
        if (pieceIndex > 6) return null;
        let numbersSeen = 0;
        while (c() !== undefined) {
          let ipv4Piece = null;
          if (numbersSeen > 0) {
            if (c() === 0x2e && numbersSeen < 4) p++;
            else return null;
          }
          if (!isDigit(c())) return null;
          while (isDigit(c())) {
            const number = c() - 48;
            if (ipv4Piece === null) ipv4Piece = number;
            else if (ipv4Piece === 0) return null;
            else ipv4Piece = ipv4Piece * 10 + number;
            if (ipv4Piece > 255) return null;
            p++;
          }
          address[pieceIndex] = address[pieceIndex] * 0x100 + ipv4Piece;
          numbersSeen++;
          if (numbersSeen === 2 || numbersSeen === 4) pieceIndex++;
        }
        if (numbersSeen !== 4) return null;
        break;
      } else if (c() === 0x3a) {
        p++;
        if (c() === undefined) return null;
      } else if (c() !== undefined) {
        return null;
      }
      address[pieceIndex] = value;
      pieceIndex++;
    }
    if (compress !== null) {
      let swaps = pieceIndex - compress;
      pieceIndex = 7;
      while (pieceIndex !== 0 && swaps > 0) {
        const t = address[pieceIndex];
        address[pieceIndex] = address[compress + swaps - 1];
        address[compress + swaps - 1] = t;
        pieceIndex--; swaps--;
      }
    } else if (pieceIndex !== 8) {
      return null;
    }
    return address;
  }
  function serializeIPv6(address) {
    let best = -1, bestLen = 1;
    for (let i = 0; i < 8;) {
      if (address[i] !== 0) { i++; continue; }
      let j = i;
      while (j < 8 && address[j] === 0) j++;
      if (j - i > bestLen) { best = i; bestLen = j - i; }
      i = j;
    }
    let out = '';
    let ignore0 = false;
    for (let i = 0; i < 8; i++) {
      if (ignore0 && address[i] === 0) continue;
      ignore0 = false;
      if (best === i) { out += i === 0 ? '::' : ':'; ignore0 = true; continue; }
      out += address[i].toString(16);
      if (i !== 7) out += ':';
    }
    return out;
  }

  // Returns the serialized host, or null on failure.
  function parseHost(input, isOpaque) {
    if (input[0] === '[') {
      if (input[input.length - 1] !== ']') return null;
      const a = parseIPv6(input.slice(1, -1));
      return a === null ? null : '[' + serializeIPv6(a) + ']';
    }
    if (isOpaque) {
      for (let i = 0; i < input.length; i++) if (FORBIDDEN_HOST.has(input.charCodeAt(i))) return null;
      return percentEncodeString(input, C0_SET);
    }
    const domain = utf8DecodeNoBOM(percentDecode(input));
    let ascii;
    // An ASCII domain is only lowercased (the URL Standard's fast path, which also leaves
    // "xn--" labels unchecked); anything else goes through UTS #46.
    if (/^[\x00-\x7f]*$/.test(domain)) {
      ascii = domain.toLowerCase();
      if (ascii === '') return null;
    } else {
      ascii = domainToASCIIUnicode(domain);
      if (ascii === null) return null;
    }
    for (let i = 0; i < ascii.length; i++) if (isForbiddenDomain(ascii.charCodeAt(i))) return null;
    if (endsInANumber(ascii)) {
      const v4 = parseIPv4(ascii);
      return v4 === null ? null : serializeIPv4(v4);
    }
    return ascii;
  }

  // ---- the basic URL parser -----------------------------------------------------------------

  const SPECIAL = new Map([['ftp', 21], ['file', null], ['http', 80], ['https', 443], ['ws', 80], ['wss', 443]]);
  const isSpecialScheme = (s) => SPECIAL.has(s);
  const defaultPort = (s) => (SPECIAL.has(s) ? SPECIAL.get(s) : null);

  const S = {
    SCHEME_START: 1, SCHEME: 2, NO_SCHEME: 3, SPECIAL_RELATIVE_OR_AUTHORITY: 4, PATH_OR_AUTHORITY: 5,
    RELATIVE: 6, RELATIVE_SLASH: 7, SPECIAL_AUTHORITY_SLASHES: 8, SPECIAL_AUTHORITY_IGNORE_SLASHES: 9,
    AUTHORITY: 10, HOST: 11, HOSTNAME: 12, PORT: 13, FILE: 14, FILE_SLASH: 15, FILE_HOST: 16,
    PATH_START: 17, PATH: 18, OPAQUE_PATH: 19, QUERY: 20, FRAGMENT: 21,
  };

  const newRecord = () => ({ scheme: '', username: '', password: '', host: null, port: null,
    path: [], opaque: false, query: null, fragment: null });

  const isAlpha = (c) => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
  const isDigit = (c) => c >= 0x30 && c <= 0x39;
  const isWindowsDriveLetter = (s, normalizedOnly) => s.length === 2 && isAlpha(s.charCodeAt(0)) &&
    (s[1] === ':' || (!normalizedOnly && s[1] === '|'));
  function startsWithWindowsDriveLetter(cps, p) {
    if (cps.length - p < 2) return false;
    if (!isAlpha(cps[p]) || (cps[p + 1] !== 0x3a && cps[p + 1] !== 0x7c)) return false;
    if (cps.length - p === 2) return true;
    const c = cps[p + 2];
    return c === 0x2f || c === 0x5c || c === 0x3f || c === 0x23;
  }
  const includesCredentials = (url) => url.username !== '' || url.password !== '';
  function shortenPath(url) {
    const path = url.path;
    if (url.scheme === 'file' && path.length === 1 && isWindowsDriveLetter(path[0], true)) return;
    path.pop();
  }
  const isSingleDot = (s) => s === '.' || s.toLowerCase() === '%2e';
  const isDoubleDot = (s) => {
    const l = s.toLowerCase();
    return l === '..' || l === '.%2e' || l === '%2e.' || l === '%2e%2e';
  };

  const FAILURE = null;

  // Returns the url record (new or the one given), or null on failure. With a state override,
  // the given record is modified in place and the return value only signals failure.
  function basicParse(input, base, url, stateOverride) {
    if (!url) {
      url = newRecord();
      input = input.replace(/^[\x00-\x20]+|[\x00-\x20]+$/g, '');
    }
    input = input.replace(/[\t\n\r]/g, '');
    const cps = [];
    for (let i = 0; i < input.length; i++) {
      const cp = input.codePointAt(i);
      cps.push(cp);
      if (cp > 0xffff) i++;
    }
    let state = stateOverride || S.SCHEME_START;
    let buffer = '';
    let atSignSeen = false, insideBrackets = false, passwordTokenSeen = false;
    const special = () => isSpecialScheme(url.scheme);
    for (let p = 0; ; p++) {
      const c = cps[p]; // undefined at EOF
      const ch = c === undefined ? '' : fromCodePoint(c);
      switch (state) {
        case S.SCHEME_START:
          if (c !== undefined && isAlpha(c)) { buffer += ch.toLowerCase(); state = S.SCHEME; }
          else if (!stateOverride) { state = S.NO_SCHEME; p--; }
          else return FAILURE;
          break;
        case S.SCHEME:
          if (c !== undefined && (isAlpha(c) || isDigit(c) || c === 0x2b || c === 0x2d || c === 0x2e)) {
            buffer += ch.toLowerCase();
          } else if (c === 0x3a) {
            if (stateOverride) {
              if (isSpecialScheme(url.scheme) !== isSpecialScheme(buffer)) return url;
              if ((includesCredentials(url) || url.port !== null) && buffer === 'file') return url;
              if (url.scheme === 'file' && url.host === '') return url;
            }
            url.scheme = buffer;
            if (stateOverride) {
              if (url.port === defaultPort(url.scheme)) url.port = null;
              return url;
            }
            buffer = '';
            if (url.scheme === 'file') state = S.FILE;
            else if (special() && base && base.scheme === url.scheme) state = S.SPECIAL_RELATIVE_OR_AUTHORITY;
            else if (special()) state = S.SPECIAL_AUTHORITY_SLASHES;
            else if (cps[p + 1] === 0x2f) { state = S.PATH_OR_AUTHORITY; p++; }
            else { url.path = ''; url.opaque = true; state = S.OPAQUE_PATH; }
          } else if (!stateOverride) {
            buffer = ''; state = S.NO_SCHEME; p = -1;
          } else return FAILURE;
          break;
        case S.NO_SCHEME:
          if (!base || (base.opaque && c !== 0x23)) return FAILURE;
          if (base.opaque && c === 0x23) {
            url.scheme = base.scheme; url.path = base.path; url.opaque = true; url.query = base.query;
            url.fragment = ''; state = S.FRAGMENT;
          } else if (base.scheme !== 'file') { state = S.RELATIVE; p--; }
          else { state = S.FILE; p--; }
          break;
        case S.SPECIAL_RELATIVE_OR_AUTHORITY:
          if (c === 0x2f && cps[p + 1] === 0x2f) { state = S.SPECIAL_AUTHORITY_IGNORE_SLASHES; p++; }
          else { state = S.RELATIVE; p--; }
          break;
        case S.PATH_OR_AUTHORITY:
          if (c === 0x2f) state = S.AUTHORITY;
          else { state = S.PATH; p--; }
          break;
        case S.RELATIVE:
          url.scheme = base.scheme;
          if (c === 0x2f) state = S.RELATIVE_SLASH;
          else if (special() && c === 0x5c) state = S.RELATIVE_SLASH;
          else {
            url.username = base.username; url.password = base.password; url.host = base.host;
            url.port = base.port; url.path = base.path.slice(); url.query = base.query;
            if (c === 0x3f) { url.query = ''; state = S.QUERY; }
            else if (c === 0x23) { url.fragment = ''; state = S.FRAGMENT; }
            else if (c !== undefined) { url.query = null; shortenPath(url); state = S.PATH; p--; }
          }
          break;
        case S.RELATIVE_SLASH:
          if (special() && (c === 0x2f || c === 0x5c)) state = S.SPECIAL_AUTHORITY_IGNORE_SLASHES;
          else if (c === 0x2f) state = S.AUTHORITY;
          else {
            url.username = base.username; url.password = base.password; url.host = base.host;
            url.port = base.port; state = S.PATH; p--;
          }
          break;
        case S.SPECIAL_AUTHORITY_SLASHES:
          if (c === 0x2f && cps[p + 1] === 0x2f) { state = S.SPECIAL_AUTHORITY_IGNORE_SLASHES; p++; }
          else { state = S.SPECIAL_AUTHORITY_IGNORE_SLASHES; p--; }
          break;
        case S.SPECIAL_AUTHORITY_IGNORE_SLASHES:
          if (c !== 0x2f && c !== 0x5c) { state = S.AUTHORITY; p--; }
          break;
        case S.AUTHORITY:
          if (c === 0x40) {
            if (atSignSeen) buffer = '%40' + buffer;
            atSignSeen = true;
            for (const bc of buffer) {
              if (bc === ':' && !passwordTokenSeen) { passwordTokenSeen = true; continue; }
              const enc = encodeCodePoint(bc.codePointAt(0), USERINFO_SET);
              if (passwordTokenSeen) url.password += enc; else url.username += enc;
            }
            buffer = '';
          } else if (c === undefined || c === 0x2f || c === 0x3f || c === 0x23 || (special() && c === 0x5c)) {
            if (atSignSeen && buffer === '') return FAILURE;
            p -= Array.from(buffer).length + 1;
            buffer = '';
            state = S.HOST;
          } else buffer += ch;
          break;
        case S.HOST:
        case S.HOSTNAME:
          if (stateOverride && url.scheme === 'file') { p--; state = S.FILE_HOST; }
          else if (c === 0x3a && !insideBrackets) {
            if (buffer === '') return FAILURE;
            if (stateOverride === S.HOSTNAME) return FAILURE;
            const h = parseHost(buffer, !special());
            if (h === null) return FAILURE;
            url.host = h; buffer = ''; state = S.PORT;
          } else if (c === undefined || c === 0x2f || c === 0x3f || c === 0x23 || (special() && c === 0x5c)) {
            p--;
            if (special() && buffer === '') return FAILURE;
            if (stateOverride && buffer === '' && (includesCredentials(url) || url.port !== null)) return FAILURE;
            const h = parseHost(buffer, !special());
            if (h === null) return FAILURE;
            url.host = h; buffer = ''; state = S.PATH_START;
            if (stateOverride) return url;
          } else {
            if (c === 0x5b) insideBrackets = true;
            if (c === 0x5d) insideBrackets = false;
            buffer += ch;
          }
          break;
        case S.PORT:
          if (c !== undefined && isDigit(c)) buffer += ch;
          else if (c === undefined || c === 0x2f || c === 0x3f || c === 0x23 || (special() && c === 0x5c) || stateOverride) {
            if (buffer !== '') {
              const port = parseInt(buffer, 10);
              if (port > 65535) return FAILURE;
              url.port = port === defaultPort(url.scheme) ? null : port;
              buffer = '';
            }
            if (stateOverride) return url;
            state = S.PATH_START; p--;
          } else return FAILURE;
          break;
        case S.FILE:
          url.scheme = 'file';
          url.host = '';
          if (c === 0x2f || c === 0x5c) state = S.FILE_SLASH;
          else if (base && base.scheme === 'file') {
            url.host = base.host; url.path = base.path.slice(); url.query = base.query;
            if (c === 0x3f) { url.query = ''; state = S.QUERY; }
            else if (c === 0x23) { url.fragment = ''; state = S.FRAGMENT; }
            else if (c !== undefined) {
              url.query = null;
              if (!startsWithWindowsDriveLetter(cps, p)) shortenPath(url);
              else url.path = [];
              state = S.PATH; p--;
            }
          } else { state = S.PATH; p--; }
          break;
        case S.FILE_SLASH:
          if (c === 0x2f || c === 0x5c) state = S.FILE_HOST;
          else {
            if (base && base.scheme === 'file') {
              url.host = base.host;
              if (!startsWithWindowsDriveLetter(cps, p) && base.path.length > 0 && isWindowsDriveLetter(base.path[0], true)) {
                url.path.push(base.path[0]);
              }
            }
            state = S.PATH; p--;
          }
          break;
        case S.FILE_HOST:
          if (c === undefined || c === 0x2f || c === 0x5c || c === 0x3f || c === 0x23) {
            p--;
            if (!stateOverride && isWindowsDriveLetter(buffer, false)) state = S.PATH;
            else if (buffer === '') {
              url.host = '';
              if (stateOverride) return url;
              state = S.PATH_START;
            } else {
              let h = parseHost(buffer, !special());
              if (h === null) return FAILURE;
              if (h === 'localhost') h = '';
              url.host = h;
              if (stateOverride) return url;
              buffer = '';
              state = S.PATH_START;
            }
          } else buffer += ch;
          break;
        case S.PATH_START:
          if (special()) {
            state = S.PATH;
            if (c !== 0x2f && c !== 0x5c) p--;
          } else if (!stateOverride && c === 0x3f) { url.query = ''; state = S.QUERY; }
          else if (!stateOverride && c === 0x23) { url.fragment = ''; state = S.FRAGMENT; }
          else if (c !== undefined) { state = S.PATH; if (c !== 0x2f) p--; }
          else if (stateOverride && url.host === null) url.path.push('');
          break;
        case S.PATH:
          if (c === undefined || c === 0x2f || (special() && c === 0x5c) || (!stateOverride && (c === 0x3f || c === 0x23))) {
            const slash = c === 0x2f || (special() && c === 0x5c);
            if (isDoubleDot(buffer)) {
              shortenPath(url);
              if (!slash) url.path.push('');
            } else if (isSingleDot(buffer) && !slash) {
              url.path.push('');
            } else if (!isSingleDot(buffer)) {
              if (url.scheme === 'file' && url.path.length === 0 && isWindowsDriveLetter(buffer, false)) {
                buffer = buffer[0] + ':';
              }
              url.path.push(buffer);
            }
            buffer = '';
            if (c === 0x3f) { url.query = ''; state = S.QUERY; }
            if (c === 0x23) { url.fragment = ''; state = S.FRAGMENT; }
          } else {
            buffer += encodeCodePoint(c, PATH_SET);
          }
          break;
        case S.OPAQUE_PATH:
          if (c === 0x3f) { url.query = ''; state = S.QUERY; }
          else if (c === 0x23) { url.fragment = ''; state = S.FRAGMENT; }
          else if (c === 0x20) {
            const next = cps[p + 1];
            url.path += next === 0x3f || next === 0x23 ? '%20' : ' ';
          } else if (c !== undefined) url.path += encodeCodePoint(c, C0_SET);
          break;
        case S.QUERY:
          if ((!stateOverride && c === 0x23) || c === undefined) {
            url.query += percentEncodeString(buffer, special() ? SPECIAL_QUERY_SET : QUERY_SET);
            buffer = '';
            if (c === 0x23) { url.fragment = ''; state = S.FRAGMENT; }
          } else if (c !== undefined) buffer += ch;
          break;
        case S.FRAGMENT:
          if (c !== undefined) url.fragment += encodeCodePoint(c, FRAGMENT_SET);
          break;
        default:
          throw new Error('unreachable URL parser state');
      }
      if (p >= cps.length) break;
    }
    return url;
  }

  const serializePath = (url) => (url.opaque ? url.path : url.path.map((s) => '/' + s).join(''));
  function serialize(url, excludeFragment = false) {
    let out = url.scheme + ':';
    if (url.host !== null) {
      out += '//';
      if (includesCredentials(url)) {
        out += url.username;
        if (url.password !== '') out += ':' + url.password;
        out += '@';
      }
      out += url.host;
      if (url.port !== null) out += ':' + url.port;
    }
    if (url.host === null && !url.opaque && url.path.length > 1 && url.path[0] === '') out += '/.';
    out += serializePath(url);
    if (url.query !== null) out += '?' + url.query;
    if (!excludeFragment && url.fragment !== null) out += '#' + url.fragment;
    return out;
  }
  function origin(url) {
    switch (url.scheme) {
      case 'blob': {
        const inner = basicParse(serializePath(url), null);
        if (inner !== null && (inner.scheme === 'http' || inner.scheme === 'https')) return origin(inner);
        return 'null';
      }
      case 'ftp': case 'http': case 'https': case 'ws': case 'wss':
        return url.scheme + '://' + url.host + (url.port !== null ? ':' + url.port : '');
      default:
        return 'null';
    }
  }

  // ---- application/x-www-form-urlencoded ----------------------------------------------------

  function parseForm(input) {
    const out = [];
    for (const seq of input.split('&')) {
      if (seq === '') continue;
      const eq = seq.indexOf('=');
      const name = eq === -1 ? seq : seq.slice(0, eq);
      const value = eq === -1 ? '' : seq.slice(eq + 1);
      const decode = (s) => utf8DecodeNoBOM(percentDecode(s.replace(/\+/g, ' ')));
      out.push([decode(name), decode(value)]);
    }
    return out;
  }
  const serializeForm = (list) => list.map(([n, v]) => percentEncodeString(n, FORM_SET, true) + '=' + percentEncodeString(v, FORM_SET, true)).join('&');

  // ---- URLSearchParams ----------------------------------------------------------------------

  const inspectCustom = Symbol.for('nodejs.util.inspect.custom');

  class URLSearchParams {
    #list = [];
    #url = null; // the URL object whose query this mirrors, if any
    constructor(init = undefined) {
      if (init === undefined || init === null) return;
      if (typeof init === 'object' || typeof init === 'function') {
        if (typeof init[Symbol.iterator] === 'function') {
          for (const pair of init) {
            if (pair === null || (typeof pair !== 'object' && typeof pair !== 'function') || typeof pair[Symbol.iterator] !== 'function') {
              throw new TypeError("Failed to construct 'URLSearchParams': The provided value cannot be converted to a sequence.");
            }
            const items = Array.from(pair);
            if (items.length !== 2) throw new TypeError("Failed to construct 'URLSearchParams': Sequence initializer must only contain pair elements");
            this.#list.push([toUSV(items[0]), toUSV(items[1])]);
          }
        } else {
          for (const key of Reflect.ownKeys(init)) {
            if (typeof key === 'symbol') continue;
            const d = Reflect.getOwnPropertyDescriptor(init, key);
            if (d === undefined || !d.enumerable) continue;
            this.#list.push([toUSV(key), toUSV(init[key])]);
          }
        }
      } else {
        let s = toUSV(init);
        if (s[0] === '?') s = s.slice(1);
        this.#list = parseForm(s);
      }
    }
    #update() {
      if (this.#url === null) return;
      const rec = urlRecord(this.#url);
      const s = serializeForm(this.#list);
      rec.query = s === '' ? null : s;
    }
    get size() { return this.#list.length; }
    append(name, value) {
      if (arguments.length < 2) throw new TypeError("Failed to execute 'append' on 'URLSearchParams': 2 arguments required.");
      this.#list.push([toUSV(name), toUSV(value)]); this.#update();
    }
    delete(name, value = undefined) {
      if (arguments.length < 1) throw new TypeError("Failed to execute 'delete' on 'URLSearchParams': 1 argument required.");
      name = toUSV(name);
      if (value !== undefined) { value = toUSV(value); this.#list = this.#list.filter(([n, v]) => n !== name || v !== value); }
      else this.#list = this.#list.filter(([n]) => n !== name);
      this.#update();
    }
    get(name) {
      if (arguments.length < 1) throw new TypeError("Failed to execute 'get' on 'URLSearchParams': 1 argument required.");
      name = toUSV(name);
      const e = this.#list.find(([n]) => n === name);
      return e ? e[1] : null;
    }
    getAll(name) {
      if (arguments.length < 1) throw new TypeError("Failed to execute 'getAll' on 'URLSearchParams': 1 argument required.");
      name = toUSV(name);
      return this.#list.filter(([n]) => n === name).map(([, v]) => v);
    }
    has(name, value = undefined) {
      if (arguments.length < 1) throw new TypeError("Failed to execute 'has' on 'URLSearchParams': 1 argument required.");
      name = toUSV(name);
      if (value !== undefined) { value = toUSV(value); return this.#list.some(([n, v]) => n === name && v === value); }
      return this.#list.some(([n]) => n === name);
    }
    set(name, value) {
      if (arguments.length < 2) throw new TypeError("Failed to execute 'set' on 'URLSearchParams': 2 arguments required.");
      name = toUSV(name); value = toUSV(value);
      const i = this.#list.findIndex(([n]) => n === name);
      if (i === -1) this.#list.push([name, value]);
      else {
        this.#list[i][1] = value;
        this.#list = this.#list.filter(([n], j) => j <= i || n !== name);
      }
      this.#update();
    }
    sort() {
      // Stable sort by UTF-16 code units of the names.
      this.#list = this.#list.map((e, i) => [e, i]).sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1])).map(([e]) => e);
      this.#update();
    }
    forEach(callback, thisArg = undefined) {
      if (typeof callback !== 'function') throw new TypeError("Failed to execute 'forEach' on 'URLSearchParams': parameter 1 is not of type 'Function'.");
      for (let i = 0; i < this.#list.length; i++) {
        const [n, v] = this.#list[i];
        callback.call(thisArg, v, n, this);
      }
    }
    *entries() { for (let i = 0; i < this.#list.length; i++) yield [this.#list[i][0], this.#list[i][1]]; }
    *keys() { for (let i = 0; i < this.#list.length; i++) yield this.#list[i][0]; }
    *values() { for (let i = 0; i < this.#list.length; i++) yield this.#list[i][1]; }
    toString() { return serializeForm(this.#list); }
    [inspectCustom](depth, options, inspect) {
      const obj = {};
      for (const [n, v] of this.#list) obj[n] = v;
      return `URLSearchParams ${inspect(obj, options)}`;
    }
    static _attach(params, url, list) { params.#url = url; params.#list = list; }
    static _setList(params, list) { params.#list = list; }
  }
  const attachParams = URLSearchParams._attach, setParamsList = URLSearchParams._setList;
  delete URLSearchParams._attach; delete URLSearchParams._setList;
  URLSearchParams.prototype[Symbol.iterator] = URLSearchParams.prototype.entries;
  Object.defineProperty(URLSearchParams.prototype, Symbol.iterator, { enumerable: false });
  Object.defineProperty(URLSearchParams.prototype, inspectCustom, { enumerable: false });
  Object.defineProperty(URLSearchParams.prototype, Symbol.toStringTag, { value: 'URLSearchParams', configurable: true });

  // ---- URL ----------------------------------------------------------------------------------

  function parseWithBase(url, base) {
    let baseRecord = null;
    if (base !== undefined) {
      baseRecord = basicParse(toUSV(base), null);
      if (baseRecord === null) return null;
    }
    return basicParse(toUSV(url), baseRecord);
  }
  const invalid = (url, base) => new TypeError(`Invalid URL: ${String(url)}${base !== undefined ? ` (base: ${String(base)})` : ''}`);
  const cannotHaveCredentialsOrPort = (r) => r.host === null || r.host === '' || r.scheme === 'file';

  let urlRecord;
  class URL {
    #r;
    #params = null;
    constructor(url, base = undefined) {
      if (arguments.length === 0) throw new TypeError("Failed to construct 'URL': 1 argument required, but only 0 present.");
      const r = parseWithBase(url, base);
      if (r === null) throw invalid(url, base);
      this.#r = r;
    }
    static parse(url, base = undefined) {
      if (arguments.length === 0) throw new TypeError("Failed to execute 'parse' on 'URL': 1 argument required, but only 0 present.");
      try { return new URL(url, base); } catch { return null; }
    }
    static canParse(url, base = undefined) {
      if (arguments.length === 0) throw new TypeError("Failed to execute 'canParse' on 'URL': 1 argument required, but only 0 present.");
      return parseWithBase(url, base) !== null;
    }
    get href() { return serialize(this.#r); }
    set href(value) {
      const r = basicParse(toUSV(value), null);
      if (r === null) throw invalid(value);
      this.#r = r;
      if (this.#params !== null) setParamsList(this.#params, r.query === null ? [] : parseForm(r.query));
    }
    get origin() { return origin(this.#r); }
    get protocol() { return this.#r.scheme + ':'; }
    set protocol(value) { basicParse(toUSV(value) + ':', null, this.#r, S.SCHEME_START); }
    get username() { return this.#r.username; }
    set username(value) {
      if (cannotHaveCredentialsOrPort(this.#r)) return;
      this.#r.username = percentEncodeString(toUSV(value), USERINFO_SET);
    }
    get password() { return this.#r.password; }
    set password(value) {
      if (cannotHaveCredentialsOrPort(this.#r)) return;
      this.#r.password = percentEncodeString(toUSV(value), USERINFO_SET);
    }
    get host() {
      const r = this.#r;
      if (r.host === null) return '';
      return r.port === null ? r.host : r.host + ':' + r.port;
    }
    set host(value) {
      if (this.#r.opaque) return;
      this.#setWith(toUSV(value), S.HOST);
    }
    get hostname() { return this.#r.host === null ? '' : this.#r.host; }
    set hostname(value) {
      if (this.#r.opaque) return;
      this.#setWith(toUSV(value), S.HOSTNAME);
    }
    get port() { return this.#r.port === null ? '' : String(this.#r.port); }
    set port(value) {
      if (cannotHaveCredentialsOrPort(this.#r)) return;
      value = toUSV(value);
      if (value === '') this.#r.port = null;
      else this.#setWith(value, S.PORT);
    }
    get pathname() { return serializePath(this.#r); }
    set pathname(value) {
      if (this.#r.opaque) return;
      this.#r.path = [];
      basicParse(toUSV(value), null, this.#r, S.PATH_START);
    }
    get search() { const q = this.#r.query; return q === null || q === '' ? '' : '?' + q; }
    set search(value) {
      value = toUSV(value);
      if (value === '') {
        this.#r.query = null;
        if (this.#params !== null) setParamsList(this.#params, []);
        return;
      }
      const input = value[0] === '?' ? value.slice(1) : value;
      this.#r.query = '';
      basicParse(input, null, this.#r, S.QUERY);
      if (this.#params !== null) setParamsList(this.#params, parseForm(input));
    }
    get searchParams() {
      if (this.#params === null) {
        this.#params = new URLSearchParams();
        attachParams(this.#params, this, this.#r.query === null ? [] : parseForm(this.#r.query));
      }
      return this.#params;
    }
    get hash() { const f = this.#r.fragment; return f === null || f === '' ? '' : '#' + f; }
    set hash(value) {
      value = toUSV(value);
      if (value === '') { this.#r.fragment = null; return; }
      const input = value[0] === '#' ? value.slice(1) : value;
      this.#r.fragment = '';
      basicParse(input, null, this.#r, S.FRAGMENT);
    }
    toJSON() { return serialize(this.#r); }
    toString() { return serialize(this.#r); }
    // Setters run the parser on the record in place, as the spec does: a failure part-way
    // (e.g. host "example.com:65536") keeps what was already set.
    #setWith(value, state) { basicParse(value, null, this.#r, state); }
    [inspectCustom](depth, options, inspect) {
      const obj = { href: this.href, origin: this.origin, protocol: this.protocol, username: this.username,
        password: this.password, host: this.host, hostname: this.hostname, port: this.port,
        pathname: this.pathname, search: this.search, searchParams: this.searchParams, hash: this.hash };
      return `URL ${inspect(obj, options)}`;
    }
    static _record(url) { return url.#r; }
  }
  urlRecord = URL._record;
  delete URL._record;
  for (const k of ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'searchParams', 'hash']) {
    const d = Object.getOwnPropertyDescriptor(URL.prototype, k);
    d.enumerable = true;
    Object.defineProperty(URL.prototype, k, d);
  }
  Object.defineProperty(URL.prototype, inspectCustom, { enumerable: false });
  Object.defineProperty(URL.prototype, Symbol.toStringTag, { value: 'URL', configurable: true });

  return {
    URL, URLSearchParams,
    [INTERNAL]: { basicParse, serialize, parseForm, serializeForm, percentDecode,
      percentEncodeString, isURL: (v) => { try { urlRecord(v); return true; } catch { return false; } },
      recordOf: (v) => urlRecord(v) },
  };
}
