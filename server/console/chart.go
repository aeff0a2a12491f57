package console

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
)

// A workflow's last hour, per minute: runs started, of which failed, and the median
// duration of those that ended (chartMinutes: reads.go). Drawn server-side as SVG.

type wfChart struct {
	Width, Height int
	Bars          []wfChartBar
	P50Points     string // the polyline of the per-minute median durations
	Runs, Failed  int
	MaxRuns       int
	MaxP50        string
	Capped        bool // counted over the newest statRuns runs only
}

type wfChartBar struct {
	X, W           int
	RunY, RunH     int
	FailY, FailH   int
	Label          string
	Runs, Failures int
	P50            string
}

const (
	chartPlotH = 110
	chartTop   = 10
)

// workflowChart reads the workflow's runs of the last hour (at most statRuns) and draws them.
func (c *Console) workflowChart(runs []delivery.RunWithHistory, now time.Time) wfChart {
	start := now.Add(-chartMinutes * time.Minute).Truncate(time.Minute).Add(time.Minute)
	var count, failed [chartMinutes]int
	var durs [chartMinutes][]int64
	for i := range runs {
		r := &runs[i].Run
		m := int(time.UnixMilli(r.CreatedAt).Sub(start) / time.Minute)
		if m < 0 || m >= chartMinutes {
			continue
		}
		count[m]++
		if r.State == delivery.RunFailed {
			failed[m]++
		}
		if r.EndedAt > 0 {
			durs[m] = append(durs[m], r.EndedAt-r.CreatedAt)
		}
	}
	ch := wfChart{Width: 640, Height: chartTop + chartPlotH + 20, MaxRuns: 1, Capped: len(runs) >= statRuns}
	var p50 [chartMinutes]int64
	var maxP50 int64 = 1
	for i := range chartMinutes {
		ch.Runs += count[i]
		ch.Failed += failed[i]
		ch.MaxRuns = max(ch.MaxRuns, count[i])
		if len(durs[i]) > 0 {
			slices.Sort(durs[i])
			p50[i] = durs[i][(len(durs[i])-1)/2]
			maxP50 = max(maxP50, p50[i])
		}
	}
	ch.MaxP50 = (time.Duration(maxP50) * time.Millisecond).String()
	const w = 10
	var pts []string
	for i := range chartMinutes {
		runH := count[i] * chartPlotH / ch.MaxRuns
		failH := failed[i] * chartPlotH / ch.MaxRuns
		if count[i] > 0 && runH == 0 {
			runH = 1
		}
		if failed[i] > 0 && failH == 0 {
			failH = 1
		}
		base := chartTop + chartPlotH
		b := wfChartBar{X: 40 + i*w, W: w - 2, RunY: base - runH, RunH: runH, FailY: base - failH, FailH: failH,
			Label: start.Add(time.Duration(i)*time.Minute).UTC().Format("15:04") + " UTC", Runs: count[i], Failures: failed[i]}
		if len(durs[i]) > 0 {
			b.P50 = (time.Duration(p50[i]) * time.Millisecond).String()
			y := base - int(p50[i]*int64(chartPlotH)/maxP50)
			pts = append(pts, fmt.Sprintf("%d,%d", b.X+w/2-1, y))
		}
		ch.Bars = append(ch.Bars, b)
	}
	ch.P50Points = strings.Join(pts, " ")
	return ch
}
