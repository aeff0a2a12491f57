// Command duraton is the one binary of Duraton: `duraton dev` for local development,
// `duraton serve` for production, project and key administration, and `duraton bench`.
//
// Wiring is by hand here: configuration comes from flags and DURATON_* environment
// variables into each component's Config struct; nothing is global.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	setGCTarget(os.Getenv) // gctarget.go
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

const usage = `duraton — a self-hosted QStash-compatible workflow delivery service

Usage:
  duraton dev     [flags]            run locally: ./.duraton data, fixed dev credentials, loopback allowed
  duraton serve   [flags]            run in production (flags and DURATON_* variables: docs/operations.md)
  duraton project create NAME        create a project and print its API token (--store postgres://... for replicas)
  duraton project list               list projects
  duraton keys show   --project ID   print a project's signing keys
  duraton keys rotate --project ID   make the next signing key current and generate a new next key
  duraton tokens list|create|revoke  list, create (--project ID) and revoke (TOKEN-ID) API tokens (--store postgres://... for replicas)
  duraton cluster status             replicas on PostgreSQL: the shards each leads, their epochs (--store URL, --json)
  duraton events send NAME [DATA]    send an event (DATA is JSON) to DURATON_URL; shows what each workflow did
  duraton workflows list [--app A]   list the registered native workflows and their controls
  duraton runs list|get RUN-ID       list native runs (--workflow, --status, ...) or show one with its steps
  duraton check   --data DIR         check the data file's consistency (read-only; server stopped)
  duraton recover --data DIR --drop-log-after OFFSET
                                     go on without a damaged write-ahead log's tail (prints what it drops)
  duraton backup --to FILE           download a consistent snapshot from a running server (--admin-token)
  duraton restore --from FILE        put a snapshot in place as the data file of a stopped server
  duraton bench publish [flags]      benchmark durable publish → delivery on this machine
  duraton bench flow [flags]         benchmark flow-control dispatch, memory and wake latency
  duraton bench workflow [flags]     benchmark Go SDK workflow runs (steps/s, latency, overhead)
  duraton bench events [flags]       benchmark native events (accepted/s, --fan-out 1..10, event → first delivery)
  duraton bench chaos [flags]        SIGKILL a real duraton under chaotic load; check nothing is lost
  duraton bench http-floor [flags]   the machine's HTTP/1.1 loopback ceiling for the benchmarks' shapes

Run "duraton <command> -h" for the flags of a command.
`

// run executes one command and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "dev":
		err = runServer(ctx, modeDev, args[1:], stdout, stderr, getenv)
	case "serve":
		err = runServer(ctx, modeServe, args[1:], stdout, stderr, getenv)
	case "project":
		err = runProject(ctx, args[1:], stdout, stderr, getenv)
	case "keys":
		err = runKeys(ctx, args[1:], stdout, stderr, getenv)
	case "tokens":
		err = runTokens(ctx, args[1:], stdout, stderr, getenv)
	case "cluster":
		err = runCluster(ctx, args[1:], stdout, stderr, getenv)
	case "events":
		err = runEvents(ctx, args[1:], stdout, stderr, getenv)
	case "workflows":
		err = runWorkflows(ctx, args[1:], stdout, stderr, getenv)
	case "runs":
		err = runRuns(ctx, args[1:], stdout, stderr, getenv)
	case "check":
		err = runCheck(args[1:], stdout, stderr, getenv)
	case "recover":
		err = runRecover(args[1:], stdout, stderr, getenv)
	case "backup":
		err = runBackup(ctx, args[1:], stdout, stderr, getenv)
	case "restore":
		err = runRestore(args[1:], stdout, stderr, getenv)
	case "bench":
		err = runBench(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "duraton: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		if err == errUsage {
			return 2
		}
		fmt.Fprintf(stderr, "duraton: %v\n", err)
		return 1
	}
	return 0
}
