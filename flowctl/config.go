package flowctl

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
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

// Parse reads a key and its value header. The value is parsed leniently, as the SDKs write
// it in several forms: items split on ",", trimmed, each "name=value"; period as "Ns",
// "Nm", "Nh", "Nd", a bare integer (seconds) or a Go duration. The period defaults to 1s.
func Parse(key, value string) (Config, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return Config{}, fmt.Errorf("%w: Upstash-Flow-Control-Key is required when Upstash-Flow-Control-Value is set", ErrInvalid)
	}
	if len(key) > MaxKeyLen || !keyPattern.MatchString(key) {
		return Config{}, fmt.Errorf("%w: Upstash-Flow-Control-Key %q must match ^[a-zA-Z0-9\\-_.]+$ and be at most %d bytes", ErrInvalid, key, MaxKeyLen)
	}
	c := Config{Key: key, Period: DefaultPeriod}
	seen := map[string]bool{}
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return Config{}, fmt.Errorf("%w: Upstash-Flow-Control-Value item %q is not name=value", ErrInvalid, item)
		}
		name, val = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(val)
		canonical := name
		if canonical == "ratepersecond" {
			canonical = "rate"
		}
		if seen[canonical] {
			return Config{}, fmt.Errorf("%w: Upstash-Flow-Control-Value gives %s more than once", ErrInvalid, canonical)
		}
		seen[canonical] = true
		switch name {
		case "parallelism":
			n, err := positiveInt(val, MaxParallelism)
			if err != nil {
				return Config{}, fmt.Errorf("%w: Upstash-Flow-Control-Value parallelism=%q: %v", ErrInvalid, val, err)
			}
			c.Parallelism = n
		case "rate", "ratepersecond":
			n, err := positiveInt(val, MaxRate)
			if err != nil {
				return Config{}, fmt.Errorf("%w: Upstash-Flow-Control-Value rate=%q: %v", ErrInvalid, val, err)
			}
			c.Rate = n
		case "period":
			d, err := ParsePeriod(val)
			if err != nil {
				return Config{}, fmt.Errorf("%w: Upstash-Flow-Control-Value period=%q: %v", ErrInvalid, val, err)
			}
			c.Period = d
		default:
			return Config{}, fmt.Errorf("%w: Upstash-Flow-Control-Value has unknown item %q (want parallelism, rate, period)", ErrInvalid, name)
		}
	}
	if c.Parallelism == 0 && c.Rate == 0 {
		return Config{}, fmt.Errorf("%w: Upstash-Flow-Control-Value needs parallelism or rate", ErrInvalid)
	}
	return c, nil
}

func positiveInt(s string, max int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	if n < 1 || n > max {
		return 0, fmt.Errorf("must be between 1 and %d", max)
	}
	return n, nil
}

// ParsePeriod reads a period: "Ns", "Nm", "Nh", "Nd", a bare integer (seconds) or a Go
// duration. It must be positive and at most MaxPeriod.
func ParsePeriod(s string) (time.Duration, error) {
	var d time.Duration
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 1 || n > int64(MaxPeriod/time.Second) {
			return 0, fmt.Errorf("must be between 1s and %s", MaxPeriod)
		}
		return time.Duration(n) * time.Second, nil
	}
	if strings.HasSuffix(s, "d") {
		n, err := strconv.ParseInt(strings.TrimSuffix(s, "d"), 10, 64)
		if err != nil {
			return 0, errors.New("not a duration")
		}
		if n < 1 || n > 7 {
			return 0, fmt.Errorf("must be between 1s and %s", MaxPeriod)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("not a duration")
	}
	if d < time.Second || d > MaxPeriod {
		return 0, fmt.Errorf("must be between 1s and %s", MaxPeriod)
	}
	return d, nil
}

// Value renders the configuration in the SDK's wire form, only the parts that are set:
// "parallelism=N, rate=N, period=Ns".
func (c Config) Value() string {
	var parts []string
	if c.Parallelism > 0 {
		parts = append(parts, "parallelism="+strconv.Itoa(c.Parallelism))
	}
	if c.Rate > 0 {
		parts = append(parts, "rate="+strconv.Itoa(c.Rate))
		parts = append(parts, "period="+strconv.FormatInt(int64(c.Period/time.Second), 10)+"s")
	}
	return strings.Join(parts, ", ")
}
