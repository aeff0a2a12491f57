package wire

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// FlowControlValue is the value of Upstash-Flow-Control-Value: "parallelism=N, rate=N,
// period=Ns" (docs/protocol.md, "Flow control"). Zero means the part is not given. This is the
// one parser and renderer of the format: the server reads publish headers with it and renders
// the delivered header with it, the SDK renders its publishes and reads its deliveries with
// it. Limits (the largest parallelism, the period range) are the server's business (flowctl),
// not the format's.
type FlowControlValue struct {
	Parallelism int
	Rate        int
	Period      time.Duration
}

// ErrFlowControlValue marks a value that is not in the format; the error text names the
// header and the item.
var ErrFlowControlValue = errors.New("invalid " + HeaderFlowControlValue)

// ParseFlowControlValue reads a flow-control value leniently, as the SDKs write it in
// several forms: items split on ",", trimmed, each "name=value" with a case-insensitive
// name (parallelism, rate or its alias ratePerSecond, period); numbers are positive
// integers; the period is "Ns", "Nm", "Nh", "Nd", a bare integer (seconds) or a Go
// duration, and positive. Empty items are skipped; an empty value gives the zero value.
func ParseFlowControlValue(s string) (FlowControlValue, error) {
	var v FlowControlValue
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return FlowControlValue{}, fmt.Errorf("%w: %s item %q is not name=value", ErrFlowControlValue, HeaderFlowControlValue, item)
		}
		name, val = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(val)
		var err error
		switch name {
		case "parallelism":
			v.Parallelism, err = positiveInt(val)
		case "rate", "ratepersecond":
			name = "rate"
			v.Rate, err = positiveInt(val)
		case "period":
			v.Period, err = ParsePeriod(val)
		default:
			return FlowControlValue{}, fmt.Errorf("%w: %s has unknown item %q (want parallelism, rate, period)", ErrFlowControlValue, HeaderFlowControlValue, name)
		}
		if err != nil {
			return FlowControlValue{}, fmt.Errorf("%w: %s %s=%q: %v", ErrFlowControlValue, HeaderFlowControlValue, name, val, err)
		}
		if seen[name] {
			return FlowControlValue{}, fmt.Errorf("%w: %s gives %s more than once", ErrFlowControlValue, HeaderFlowControlValue, name)
		}
		seen[name] = true
	}
	return v, nil
}

func positiveInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	if n < 1 {
		return 0, errors.New("must be a positive integer")
	}
	return n, nil
}

// ParsePeriod reads a flow-control period: "Ns", "Nm", "Nh", "Nd", a bare integer
// (seconds) or a Go duration. It must be positive.
func ParsePeriod(s string) (time.Duration, error) {
	unit, num := time.Second, s
	if n, ok := strings.CutSuffix(s, "d"); ok {
		unit, num = 24*time.Hour, n
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 1 || n > int64(math.MaxInt64/unit) {
			return 0, errors.New("must be a positive duration")
		}
		return time.Duration(n) * unit, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("not a duration")
	}
	if d <= 0 {
		return 0, errors.New("must be a positive duration")
	}
	return d, nil
}

// String renders the value in the SDKs' form, each part only when set:
// "parallelism=N, rate=N, period=Ns". A period of whole seconds is written "Ns", any
// other as a Go duration ("1.5s"), so that parsing gives it back exactly.
func (v FlowControlValue) String() string {
	var parts []string
	if v.Parallelism > 0 {
		parts = append(parts, "parallelism="+strconv.Itoa(v.Parallelism))
	}
	if v.Rate > 0 {
		parts = append(parts, "rate="+strconv.Itoa(v.Rate))
	}
	if v.Period > 0 {
		p := v.Period.String()
		if v.Period%time.Second == 0 {
			p = strconv.FormatInt(int64(v.Period/time.Second), 10) + "s"
		}
		parts = append(parts, "period="+p)
	}
	return strings.Join(parts, ", ")
}
