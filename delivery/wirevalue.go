package delivery

import (
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
)

// flowControlValue renders the Upstash-Flow-Control-Value a delivery carries: the limits
// it was admitted under, the period only with a rate (flowctl defaults it even without).
func flowControlValue(fc *flowctl.Config) string {
	v := wire.FlowControlValue{Parallelism: fc.Parallelism, Rate: fc.Rate}
	if fc.Rate > 0 {
		v.Period = fc.Period
	}
	return v.String()
}
