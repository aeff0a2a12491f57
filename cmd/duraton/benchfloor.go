package main

// `duraton bench http-floor`: the machine's ceiling for Duraton's two request shapes with
// nothing but HTTP/1.1 on loopback. No storage, no signing, no engine: a client, a front
// server and a receiver, all in this process, doing only the exchanges Duraton's
// benchmarks need per operation. What `bench publish` and `bench workflow` reach is then
// read as a fraction of what this machine allows at all.
//
//   - publish: per message, the publisher's POST to the front (net/http, as Duraton's
//     API) and the front's delivery of its body to the receiver (delivery/internal/h1, Duraton's
//     delivery client), then the front's answer. Two exchanges per message, as
//     `bench publish`.
//   - workflow: per run, one POST to the front (the trigger), which then delivers
//     --steps times to the receiver, one after the other, and answers. 1 + steps
//     exchanges per run, as `bench workflow` with inline answers (one delivery per step).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery"
)

// floorResult is the JSON line of `bench http-floor`. An op is a message (publish) or a
// step (workflow).
type floorResult struct {
	Shape       string  `json:"shape"`
	Op          string  `json:"op"`
	Ops         int     `json:"ops"`
	Steps       int     `json:"steps,omitempty"`
	Concurrency int     `json:"concurrency"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	CPUUsPerOp  float64 `json:"cpu_us_per_op"` // this process's user + system CPU
	// RequestP50Ms is the median of a client's request to the front: a message's
	// publish and delivery, or a run's trigger and all its deliveries.
	RequestP50Ms float64 `json:"request_p50_ms"`
	Exchanges    int64   `json:"exchanges"` // HTTP exchanges made, all told
	CPUs         int     `json:"cpus"`
}

func runBenchFloor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench http-floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	shape := fs.String("shape", "publish", "publish (2 exchanges per message) or workflow (1 trigger + 1 delivery per step)")
	ops := fs.Int("ops", 50000, "messages (publish) or steps (workflow)")
	steps := fs.Int("steps", 3, "with --shape workflow: deliveries per run")
	conc := fs.Int("concurrency", 64, "closed-loop clients")
	jsonOnly := fs.Bool("json", false, "print only the JSON result line")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *shape != "publish" && *shape != "workflow" {
		return fmt.Errorf("--shape is publish or workflow, not %q", *shape)
	}
	if *ops < 1 || *steps < 1 || *steps > 100 || *conc < 1 || *conc > 10_000 {
		return errors.New("--ops must be ≥ 1, --steps between 1 and 100 and --concurrency between 1 and 10000")
	}
	if *shape == "publish" {
		*steps = 0
	}
	res, err := benchFloor(ctx, *ops, *steps, *conc)
	if err != nil {
		return err
	}
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if !*jsonOnly {
		fmt.Fprintf(stdout, "%s: %.0f %ss/s at %.1f µs of CPU each (HTTP/1.1 on loopback only, %d CPUs)\n", res.Shape, res.OpsPerSec, res.Op, res.CPUUsPerOp, res.CPUs)
	}
	_, err = fmt.Fprintln(stdout, string(line))
	return err
}

// benchFloor runs ops operations through a front server and a receiver: steps deliveries
// per request to the front (workflow), or one (publish, steps == 0).
func benchFloor(ctx context.Context, ops, steps, conc int) (floorResult, error) {
	perRequest, res := 1, floorResult{Shape: "publish", Op: "message", Ops: ops, Concurrency: conc, CPUs: runtime.NumCPU()}
	if steps > 0 {
		perRequest, res.Shape, res.Op, res.Steps = steps, "workflow", "step", steps
	}
	requests := (ops + perRequest - 1) / perRequest
	res.Ops = requests * perRequest

	var exchanges atomic.Int64
	receiverAnswer := []byte(`[{"stepId":1,"out":"0"}]`)
	receiver, err := serveFloor(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		exchanges.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(receiverAnswer)
	}))
	if err != nil {
		return floorResult{}, err
	}
	defer receiver.Close()
	deliveries, err := delivery.NewClientTransport((&net.Dialer{}).DialContext, &http.Transport{})
	if err != nil {
		return floorResult{}, err
	}
	defer deliveries.CloseIdleConnections()
	receiverURL := "http://" + receiver.Addr + "/route"
	front, err := serveFloor(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		exchanges.Add(1)
		for range perRequest {
			if err := postFloor(r.Context(), deliveries, receiverURL, body, http.StatusOK); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"messageId":"msg_floor"}`))
	}))
	if err != nil {
		return floorResult{}, err
	}
	defer front.Close()

	publisher := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}
	defer publisher.CloseIdleConnections()
	frontURL := "http://" + front.Addr + "/v2/publish/" + receiverURL
	cpu0, err := selfCPU()
	if err != nil {
		return floorResult{}, err
	}
	took := make([]time.Duration, requests)
	start := time.Now()
	err = closedLoop(ctx, requests, conc, func(i int) error {
		t0 := time.Now()
		defer func() { took[i] = time.Since(t0) }()
		body := strconv.Itoa(i) + " " + strconv.FormatInt(time.Now().UnixNano(), 10)
		return postFloor(ctx, publisher, frontURL, []byte(body), http.StatusCreated)
	})
	elapsed := time.Since(start)
	if err != nil {
		return floorResult{}, err
	}
	cpu1, err := selfCPU()
	if err != nil {
		return floorResult{}, err
	}
	res.OpsPerSec = round1(float64(res.Ops) / elapsed.Seconds())
	res.CPUUsPerOp = round1(float64((cpu1 - cpu0).Microseconds()) / float64(res.Ops))
	res.Exchanges = exchanges.Load()
	res.RequestP50Ms = percentileMs(took, 0.50)
	return res, nil
}

// postFloor posts body to url through rt (the publisher's or the delivery client) and
// reads the answer, which must have status want.
func postFloor(ctx context.Context, rt http.RoundTripper, url string, body []byte, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}

// floorServer is a net/http server on a loopback port.
type floorServer struct {
	Addr string
	srv  *http.Server
}

func serveFloor(h http.Handler) (*floorServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &floorServer{Addr: ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *floorServer) Close() { _ = s.srv.Close() }
