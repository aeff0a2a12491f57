package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
)

// compactSerializer writes JSON without HTML escaping (SDKs compare some bodies byte for
// byte) and turns a malformed request body into a 400 that says what is wrong.
type compactSerializer struct{}

func (compactSerializer) Serialize(c echo.Context, i any, indent string) error {
	enc := json.NewEncoder(c.Response())
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	return enc.Encode(i)
}

func (compactSerializer) Deserialize(c echo.Context, i any) error {
	dec := json.NewDecoder(c.Request().Body)
	if err := dec.Decode(i); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return badRequest("invalid JSON body: %v", err)
	}
	return nil
}
