package sdk

import (
	"errors"
	"fmt"
	"net/http"
)

// APIError is a non-2xx answer of the server. Match it with errors.As; IsNotFound covers
// the most common case.
type APIError struct {
	// Status is the HTTP status code of the answer.
	Status int
	// Message is the server's explanation: the "error" field of its JSON body, else the
	// body text, else the status text.
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("duraton: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// IsNotFound reports whether err is an *APIError with status 404: no such message, queue,
// run or dead letter in the caller's project.
func IsNotFound(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound
}

// ReceiverError is the class of a Receiver failure that is not a signature failure (those
// wrap the wire.ErrSignature* classes). It is a constant type so no caller can reassign it.
type ReceiverError string

func (e ReceiverError) Error() string { return string(e) }

// ErrBodyTooLarge is returned (wrapped) by Receiver.VerifyRequest when the request body
// exceeds the receiver's limit.
const ErrBodyTooLarge ReceiverError = "sdk: request body too large"
