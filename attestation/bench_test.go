package attestation_test

import (
	"runtime"
	"testing"
	"time"
)

// The server's cost of checking one attested request, against the raw signature checks it
// contains, measured in the same run (`make bench` runs these through hack/bench -attestation
// and reports the ratio; see docs/benchmarks.md). One piece of evidence is made on the TPM
// simulator before the timer starts; Verify is pure, so it can be checked again and again.
//
//   - BenchmarkVerify: attestation.Split, x509.ParseCertificateRequest, CheckSignature (the
//     proof of possession) and attestation.Verify with the allow-list trust, the ticket key
//     and a clock inside the ticket's life: what the server does for each request;
//   - BenchmarkVerifyRawSignatures, the anchor: the three ECDSA P-256 verifications that
//     contains, done directly with crypto/ecdsa on the same keys, digests and signatures
//     (decoded beforehand): the AK's over CertifyInfo, the binding key's over the binding
//     digest, the request's own;
//   - the Parallel variants: the same with b.RunParallel, GOMAXPROCS goroutines, for the rate
//     per core when every core verifies.
//
// Each reports verifications/s and verifications/s/core (the rate over GOMAXPROCS for the
// parallel ones, the rate itself for the serial ones, which run on one goroutine) and, on
// Linux for runs long enough, cpu-ns/op: the process's CPU time per verification (every
// thread, the garbage collector's included), which other work on the machine inflates far
// less than the wall time.

func BenchmarkVerify(b *testing.B) {
	f := fixture(b)
	cpu := startCPU()
	for b.Loop() {
		if _, err := verifyRequest(f.full, f.opts); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, 1, cpu)
}

func BenchmarkVerifyRawSignatures(b *testing.B) {
	f := fixture(b)
	cpu := startCPU()
	for b.Loop() {
		if !f.raw.check() {
			b.Fatal("a raw signature check failed")
		}
	}
	reportRate(b, 1, cpu)
}

func BenchmarkVerifyParallel(b *testing.B) {
	f := fixture(b)
	cpu := startCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := verifyRequest(f.full, f.opts); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, runtime.GOMAXPROCS(0), cpu)
}

func BenchmarkVerifyRawSignaturesParallel(b *testing.B) {
	f := fixture(b)
	cpu := startCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !f.raw.check() {
				b.Error("a raw signature check failed")
				return
			}
		}
	})
	reportRate(b, runtime.GOMAXPROCS(0), cpu)
}

// fixture is the benchmarks' evidence, made once per process outside any timed loop.
func fixture(b *testing.B) *verifyFixture {
	b.Helper()
	f, err := loadVerifyFixture()
	if err != nil {
		b.Fatalf("making evidence on the simulator: %v", err)
	}
	return f
}

// cpuStart is the process's CPU time when a timed loop starts, if it can be read.
type cpuStart struct {
	at time.Duration
	ok bool
}

func startCPU() cpuStart {
	at, ok := processCPU()
	return cpuStart{at, ok}
}

// minCPU is the least CPU time over which cpu-ns/op is reported: 50 of /proc's 10 ms ticks.
const minCPU = 500 * time.Millisecond

// reportRate reports verifications per second, per core over the given number of cores,
// and the CPU time per verification since cpu.
func reportRate(b *testing.B, cores int, cpu cpuStart) {
	if s := b.Elapsed().Seconds(); s > 0 {
		rate := float64(b.N) / s
		b.ReportMetric(rate, "verifications/s")
		b.ReportMetric(rate/float64(cores), "verifications/s/core")
	}
	if now, ok := processCPU(); ok && cpu.ok && now-cpu.at >= minCPU {
		b.ReportMetric(float64(now-cpu.at)/float64(b.N), "cpu-ns/op")
	}
}
