package main

import (
	"fmt"
	"os"
	"slices"
)

// serverAloneOpts selects the server-alone measurements: every CA key type × caller count ×
// lint setting is one row, measured over rounds.
type serverAloneOpts struct {
	keys      []string
	callers   []int
	lintModes []bool
	rounds    int
}

// row is one server-alone configuration. Each round measures the bare anchor, the pipeline
// in-process, the server over gRPC and a health check of that server one right after
// another, so that the ratio of a round compares figures taken on the same machine state;
// rates are operations per second, one per round. The target applies to grpc, the server as
// clients reach it; inProcess (the same pipeline called as a Go function) shows what gRPC and
// mutual TLS add, and echo (a call that does nothing) what a gRPC call costs by itself.
type row struct {
	ca                          string
	callers                     int
	lint                        bool
	bare, inProcess, grpc, echo []float64
}

// serverAlone measures every configuration of o and returns its rows, printing each to stderr
// as it completes. The four measurements of a round run in roundOrder.
func serverAlone(o serverAloneOpts) ([]row, error) {
	var rows []row
	for _, kt := range o.keys {
		ca, err := newCA(kt)
		if err != nil {
			return nil, err
		}
		csr, err := newCSR("bench-client")
		if err != nil {
			return nil, err
		}
		bare := func() error { return bareIssue(ca, csr) }
		for _, callers := range o.callers {
			for _, lintOn := range o.lintModes {
				inProcess, closeInProcess, err := signetIssue(ca, csr, lintOn)
				if err != nil {
					return nil, err
				}
				overGRPC, echo, closeGRPC, err := grpcIssue(ca, csr, lintOn)
				if err != nil {
					closeInProcess()
					return nil, err
				}
				calls := [...]func() error{bare, inProcess, overGRPC, echo}
				var rates [len(calls)][]float64
				for round := range o.rounds {
					for _, i := range roundOrder(len(calls), round) {
						rates[i] = append(rates[i], measure(callers, calls[i]))
					}
				}
				closeGRPC()
				closeInProcess()
				r := row{ca: kt, callers: callers, lint: lintOn, bare: rates[0], inProcess: rates[1], grpc: rates[2], echo: rates[3]}
				rows = append(rows, r)
				fmt.Fprintln(os.Stderr, r.markdown())
			}
		}
	}
	return rows, nil
}

// ratios is each round's gRPC rate over the same round's bare rate.
func (r row) ratios() []float64 {
	out := make([]float64, 0, len(r.grpc))
	for i := range min(len(r.grpc), len(r.bare)) {
		out = append(out, r.grpc[i]/r.bare[i])
	}
	return out
}

// bounds is, for each round, the gRPC/bare ratio the server would reach if a call over gRPC
// cost the in-process pipeline plus one health check and nothing more: the two per-call times
// add (the wait of one caller; the CPU time per call when many callers keep the cores busy).
// A target above a round's bound cannot be met by the handler alone.
func (r row) bounds() []float64 {
	out := make([]float64, 0, len(r.bare))
	for i := range min(len(r.bare), len(r.inProcess), len(r.echo)) {
		out = append(out, 1/(1/r.inProcess[i]+1/r.echo[i])/r.bare[i])
	}
	return out
}

// target is the issue's floor for the gRPC/bare ratio: 0.60 with lint off, 0.25 with the
// default gate on.
func (r row) target() float64 {
	if r.lint {
		return 0.25
	}
	return 0.60
}

func (r row) markdown() string {
	lintLabel := "off"
	if r.lint {
		lintLabel = "on (default gate)"
	}
	ratios := r.ratios()
	ratio, target := median(ratios), r.target()
	verdict := "meets"
	if ratio < target {
		verdict = "BELOW"
	}
	meeting := 0
	for _, x := range ratios {
		if x >= target {
			meeting++
		}
	}
	return fmt.Sprintf("| %s | %d | %s | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f–%.2f | %.2f | ≥ %.2f %s (%d of %d rounds) |",
		r.ca, r.callers, lintLabel, median(r.bare), median(r.inProcess), median(r.grpc), median(r.echo),
		ratio, slices.Min(ratios), slices.Max(ratios), median(r.bounds()), target, verdict, meeting, len(ratios))
}

func render(rows []row) string {
	s := "| CA key | callers | lint | bare parse+sign+PEM (ops/s) | signet pipeline in-process (ops/s) | signet-server over gRPC + mTLS (ops/s) | health check, same server (ops/s) | ratio gRPC / bare | rounds' ratios | ratio if gRPC cost one health check | target |\n"
	s += "|---|---|---|---|---|---|---|---|---|---|---|\n"
	for _, r := range rows {
		s += r.markdown() + "\n"
	}
	return s
}

// median is the middle value of xs, or the mean of the two middle values for an even count.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
