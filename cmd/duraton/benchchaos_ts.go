package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
)

// startChaosTSEndpoint is `bench chaos --endpoint=ts-native`: the bench's workflow served
// by @duraton/sdk (sdk/js's bench/chaos-endpoint.mjs) in a node child, behind ep's chaos,
// which forwards what it does not break to it. base is ep's URL, where Duraton delivers and
// where the workflow publishes its steps; the child reports each step function it runs
// ("exec") and each run it finishes ("done <id>").
func startChaosTSEndpoint(ctx context.Context, sdkDir, base string, getenv func(string) string, ep *chaosEndpoint) (*benchChild, error) {
	node, dir, err := nodeAndPackage(wfEndpoint{kind: "ts-native", tsDir: sdkDir})
	if err != nil {
		return nil, err
	}
	var env []string
	for _, k := range []string{"QSTASH_URL", "QSTASH_TOKEN", "QSTASH_CURRENT_SIGNING_KEY", "QSTASH_NEXT_SIGNING_KEY"} {
		env = append(env, k+"="+getenv(k))
	}
	cmd := exec.Command(node, filepath.Join(dir, "bench", "chaos-endpoint.mjs"), base)
	cmd.Dir = dir
	child, err := startChildProcess(ctx, "node bench/chaos-endpoint.mjs", cmd, env, func(line string) {
		switch id, done := strings.CutPrefix(line, "done "); {
		case line == "exec":
			ep.execs.Add(1)
		case done:
			ep.mu.Lock()
			ep.finished[id] = true
			ep.mu.Unlock()
		}
	})
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(child.URL)
	if err != nil {
		child.close()
		return nil, fmt.Errorf("node endpoint URL %q: %w", child.URL, err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	// A delivery the server gave up on (its attempt timeout, a kill) ends the forwarded
	// request too: that is the chaos, not an error to log.
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		http.Error(w, "chaos proxy: "+err.Error(), http.StatusBadGateway)
	}
	ep.handler = proxy
	return child, nil
}
