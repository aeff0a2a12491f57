package delivery

import "github.com/duraton/duraton/storage"

// ErrStoreUnavailable is a write the data file refused (disk full, I/O error): nothing of
// the request was stored, and trying again later may succeed. The server answers it
// with 503; an attempt whose outcome cannot be stored is retried (recordWithRetry).
var ErrStoreUnavailable = storage.ErrWriteFailed
