// DOMException (WebIDL, https://webidl.spec.whatwg.org/#idl-DOMException).
// An Error subclass whose name, message and code are prototype accessors, with the legacy
// code constants on both the constructor and the prototype.
(host) => {
  'use strict';
  const ErrorCtor = Error;
  const defineProperty = Object.defineProperty;

  // name -> legacy code, and the constant each code is exposed as.
  const CODES = [
    ['IndexSizeError', 1, 'INDEX_SIZE_ERR'],
    ['DOMStringSizeError', 2, 'DOMSTRING_SIZE_ERR'],
    ['HierarchyRequestError', 3, 'HIERARCHY_REQUEST_ERR'],
    ['WrongDocumentError', 4, 'WRONG_DOCUMENT_ERR'],
    ['InvalidCharacterError', 5, 'INVALID_CHARACTER_ERR'],
    ['NoDataAllowedError', 6, 'NO_DATA_ALLOWED_ERR'],
    ['NoModificationAllowedError', 7, 'NO_MODIFICATION_ALLOWED_ERR'],
    ['NotFoundError', 8, 'NOT_FOUND_ERR'],
    ['NotSupportedError', 9, 'NOT_SUPPORTED_ERR'],
    ['InUseAttributeError', 10, 'INUSE_ATTRIBUTE_ERR'],
    ['InvalidStateError', 11, 'INVALID_STATE_ERR'],
    ['SyntaxError', 12, 'SYNTAX_ERR'],
    ['InvalidModificationError', 13, 'INVALID_MODIFICATION_ERR'],
    ['NamespaceError', 14, 'NAMESPACE_ERR'],
    ['InvalidAccessError', 15, 'INVALID_ACCESS_ERR'],
    ['ValidationError', 16, 'VALIDATION_ERR'],
    ['TypeMismatchError', 17, 'TYPE_MISMATCH_ERR'],
    ['SecurityError', 18, 'SECURITY_ERR'],
    ['NetworkError', 19, 'NETWORK_ERR'],
    ['AbortError', 20, 'ABORT_ERR'],
    ['URLMismatchError', 21, 'URL_MISMATCH_ERR'],
    ['QuotaExceededError', 22, 'QUOTA_EXCEEDED_ERR'],
    ['TimeoutError', 23, 'TIMEOUT_ERR'],
    ['InvalidNodeTypeError', 24, 'INVALID_NODE_TYPE_ERR'],
    ['DataCloneError', 25, 'DATA_CLONE_ERR'],
  ];
  const codeOf = new Map(CODES.map(([name, code]) => [name, code]));

  class DOMException extends ErrorCtor {
    #name;
    #message;
    constructor(message = '', options = 'Error') {
      super();
      this.#message = String(message);
      if (options !== null && typeof options === 'object') {
        const name = options.name;
        this.#name = name === undefined ? 'Error' : String(name);
        if ('cause' in options) {
          defineProperty(this, 'cause', {
            value: options.cause, writable: true, configurable: true, enumerable: false,
          });
        }
      } else {
        this.#name = String(options);
      }
      // V8 captured the stack header before name/message existed; rebuild it once.
      const stack = this.stack;
      if (typeof stack === 'string') {
        const nl = stack.indexOf('\n    at');
        const head = this.#message ? `${this.#name}: ${this.#message}` : this.#name;
        defineProperty(this, 'stack', {
          value: nl === -1 ? head : head + stack.slice(nl),
          writable: true, configurable: true, enumerable: false,
        });
      }
    }
    get name() { return this.#name; }
    get message() { return this.#message; }
    get code() { return codeOf.get(this.#name) || 0; }
  }
  for (const key of ['name', 'message', 'code']) {
    const d = Object.getOwnPropertyDescriptor(DOMException.prototype, key);
    d.enumerable = true;
    defineProperty(DOMException.prototype, key, d);
  }
  for (const [, code, constant] of CODES) {
    const d = { value: code, writable: false, enumerable: true, configurable: false };
    defineProperty(DOMException, constant, d);
    defineProperty(DOMException.prototype, constant, d);
  }
  defineProperty(DOMException.prototype, Symbol.toStringTag, {
    value: 'DOMException', configurable: true,
  });
  return { DOMException };
}
