package flowctl

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Limits on a flow-control configuration. A value outside them is refused at publish time.
const (
	MaxKeyLen      = 256
	MaxParallelism = 1_000_000
	MaxRate        = 1_000_000
	MaxPeriod      = 7 * 24 * time.Hour
	DefaultPeriod  = time.Second
)

var keyPattern = regexp.MustCompile(`^[a-zA-Z0-9\-_.]+$`)

// Config is the flow-control configuration of one delivery under one key, as given by
// Upstash-Flow-Control-Key and Upstash-Flow-Control-Value. Zero Parallelism or Rate means
// that limit is not set; at least one of them is.
type Config struct {
	Key         string        `json:"key"`
	Parallelism int           `json:"parallelism,omitempty"`
	Rate        int           `json:"rate,omitempty"`
	Period      time.Duration `json:"period,omitempty"`
}

// ErrInvalid marks a configuration that cannot be accepted; the error text names the part.
var ErrInvalid = errors.New("invalid flow control")

// The header names in error texts: flowctl imports nothing of Duraton's, so it does not
// take them from sdk/wire; the server renames them for nested (callback) headers.
const (
	keyHeader   = "Upstash-Flow-Control-Key"
	valueHeader = "Upstash-Flow-Control-Value"
)

// New checks a key and the limits given for it, as parsed from its value header by the
// protocol package (sdk/wire.ParseFlowControlValue, which owns the format: flowctl only
// judges the values). Zero means "not given"; a zero period defaults to DefaultPeriod.
// At least one of parallelism and rate must be given.
func New(key string, parallelism, rate int, period time.Duration) (Config, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return Config{}, fmt.Errorf("%w: %s is required when %s is set", ErrInvalid, keyHeader, valueHeader)
	}
	if err := CheckKey(key); err != nil {
		return Config{}, err
	}
	c := Config{Key: key, Parallelism: parallelism, Rate: rate, Period: period}
	if c.Period == 0 {
		c.Period = DefaultPeriod
	}
	switch {
	case parallelism < 0 || parallelism > MaxParallelism:
		return Config{}, fmt.Errorf("%w: %s parallelism=%d: must be between 1 and %d", ErrInvalid, valueHeader, parallelism, MaxParallelism)
	case rate < 0 || rate > MaxRate:
		return Config{}, fmt.Errorf("%w: %s rate=%d: must be between 1 and %d", ErrInvalid, valueHeader, rate, MaxRate)
	case c.Period < time.Second || c.Period > MaxPeriod:
		return Config{}, fmt.Errorf("%w: %s period=%s: must be between 1s and %s", ErrInvalid, valueHeader, c.Period, MaxPeriod)
	case parallelism == 0 && rate == 0:
		return Config{}, fmt.Errorf("%w: %s needs parallelism or rate", ErrInvalid, valueHeader)
	}
	return c, nil
}

// CheckKey reports whether key is a valid flow-control key; the error names the rule.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen || !keyPattern.MatchString(key) {
		return fmt.Errorf("%w: %s %q must match ^[a-zA-Z0-9\\-_.]+$ and be at most %d bytes", ErrInvalid, keyHeader, key, MaxKeyLen)
	}
	return nil
}
