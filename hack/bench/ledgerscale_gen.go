package main

// The generator of -ledger-scale: records shaped like the issuances of the kubelet signers,
// appended through the real ledger API (Open, then Append from many goroutines, so that they
// are group-committed as a busy server's are), stamped by a clock 72 h in the past so that
// they lie outside the server's 24 h idempotency window.
//
// The records are made from a pool (pool.json in the work directory, which the child
// processes and the anchor read too, so every ledger holds the same kind of record): one
// Rotated record per signer, which the history begins with, and poolChains issued records
// whose certificates are real P-256 leaves signed by a P-256 CA (kubelet client and serving
// certificates, about 850 bytes of PEM). Each appended record takes one of them and gets a
// fresh random serial, object UID (a UUID v4), request hash and idempotency key: the PEM's own
// serial is the pool certificate's, which nothing in the ledger reads. A record's line is about
// 1.6 KB.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/server/ledger"
)

// poolFile is the pool's file in the work directory, beside the ledgers.
const poolFile = "pool.json"

// poolChains is the number of distinct issued records of the pool.
const poolChains = 64

// poolSigners are the signers of the generated records, alternately.
var poolSigners = [...]string{"kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"}

// ledgerPool is what generated records are made of. Its JSON field names are the ledger's, so
// that v0.1.0's ledger.Record decodes it too.
type ledgerPool struct {
	// Clock is the time every record is stamped with: 72 h before the run.
	Clock   time.Time       `json:"clock"`
	Rotated []ledger.Record `json:"rotated"`
	Issued  []ledger.Record `json:"issued"`
}

// makePool makes a CA and the pool's records, stamped 72 h before now.
func makePool(now time.Time) (*ledgerPool, error) {
	clock := now.Add(-72 * time.Hour).UTC()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making the generator's CA: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "signet bench ledger-scale CA", Organization: []string{"signet bench"}},
		NotBefore: clock.Add(-365 * 24 * time.Hour), NotAfter: clock.Add(9 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(crand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("making the generator's CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("making the generator's CA: %w", err)
	}
	sum := sha256.Sum256(caDER)
	fp := hex.EncodeToString(sum[:])
	pool := &ledgerPool{Clock: clock}
	for _, signer := range poolSigners {
		pool.Rotated = append(pool.Rotated, ledger.Record{Decision: ledger.Rotated, Signer: signer, Client: "configuration",
			Authority: &ledger.Authority{CAs: []ledger.AuthorityCA{{Fingerprint: fp, State: "active", By: "configuration",
				Key: "file:///etc/signet/ca.key", Certificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))}}}})
	}
	for i := range poolChains {
		r, err := poolRecord(i, clock, ca, caKey, fp)
		if err != nil {
			return nil, err
		}
		pool.Issued = append(pool.Issued, r)
	}
	return pool, nil
}

// poolRecord is the pool's issued record i: a kubelet client certificate for even i, a
// kubelet serving one for odd i, for a node of its own.
func poolRecord(i int, clock time.Time, ca *x509.Certificate, caKey *ecdsa.PrivateKey, fp string) (ledger.Record, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return ledger.Record{}, fmt.Errorf("making the generator's certificates: %w", err)
	}
	serial, err := crand.Int(crand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return ledger.Record{}, fmt.Errorf("making the generator's certificates: %w", err)
	}
	node := fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/250, i%250+1)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore: clock.Add(-5 * time.Minute), NotAfter: clock.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true,
	}
	signer := poolSigners[i%len(poolSigners)]
	if i%2 == 1 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{node}
		tmpl.IPAddresses = []net.IP{net.IPv4(10, 0, byte(i/250), byte(i%250+1))}
	}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return ledger.Record{}, fmt.Errorf("making the generator's certificates: %w", err)
	}
	return ledger.Record{Decision: ledger.Issued, Signer: signer, Client: "spiffe://signet/watcher", Requester: "system:node:" + node,
		ObjectKind: "CertificateSigningRequest", NotBefore: tmpl.NotBefore, NotAfter: tmpl.NotAfter,
		Certificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), CA: fp}, nil
}

// write stores the pool in path.
func (p *ledgerPool) write(path string) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("writing the generator's records to %s: %w", path, err)
	}
	return nil
}

// readPool reads the pool in path.
func readPool(path string) (*ledgerPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the generator's records: %w", err)
	}
	var p ledgerPool
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("reading the generator's records in %s: %w", path, err)
	}
	if len(p.Issued) == 0 || len(p.Rotated) == 0 {
		return nil, fmt.Errorf("reading the generator's records in %s: no records", path)
	}
	return &p, nil
}

// lineBytes is the mean length of a generated record's line on disk (seq, time and hashes
// included), newline included.
func (p *ledgerPool) lineBytes() (int, error) {
	g := newRecordGen(p)
	total := 0
	for range len(p.Issued) {
		r := g.next()
		r.Seq, r.Time, r.PrevHash, r.Hash = 10_000_000, p.Clock, strings.Repeat("0", 64), strings.Repeat("0", 64)
		b, err := json.Marshal(r)
		if err != nil {
			return 0, fmt.Errorf("measuring the generator's records: %w", err)
		}
		total += len(b) + 1
	}
	return total / len(p.Issued), nil
}

// recordGen makes records from a pool. One per goroutine.
type recordGen struct {
	pool *ledgerPool
	rng  *rand.ChaCha8
	i    int
}

func newRecordGen(pool *ledgerPool) *recordGen {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	return &recordGen{pool: pool, rng: rand.NewChaCha8(seed), i: int(seed[0])}
}

// next is the pool's next issued record with a fresh serial (128 random bits, as
// kube-controller-manager's), object UID (UUID v4), request hash and idempotency key (object
// UID "/" request hash, as idempotency.Key). v0.1.0's anchor (ledgerscale_anchor.go) makes
// its records the same way.
func (g *recordGen) next() ledger.Record {
	r := g.pool.Issued[g.i%len(g.pool.Issued)]
	g.i++
	var b [64]byte
	_, _ = g.rng.Read(b[:])
	b[0] = b[0]&0x7f | 0x10 // positive, no leading zero digit
	u := b[16:32]
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	r.Serial = hex.EncodeToString(b[:16])
	r.ObjectUID = fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	r.RequestHash = hex.EncodeToString(b[32:])
	r.IdempotencyKey = r.ObjectUID + "/" + r.RequestHash
	return r
}

// appendLoop appends generated records from callers goroutines for as long as more allows (it
// is asked before each append, concurrently) and returns how many were appended, and the
// first error, after which every goroutine stops.
func appendLoop(pool *ledgerPool, callers int, more func() bool, app func(ledger.Record) error) (int64, error) {
	var (
		n      atomic.Int64
		failed atomic.Bool
		once   sync.Once
		first  error
		wg     sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			g := newRecordGen(pool)
			for !failed.Load() && more() {
				if err := app(g.next()); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), first
}

// growResult is what growing a ledger took. The anchor reports the same fields.
type growResult struct {
	Records int64 `json:"records"` // appended
	Seq     int64 `json:"seq"`     // the ledger's last seq afterwards
	OpenNs  int64 `json:"openNs"`
	Ns      int64 `json:"ns"` // of the appends
	CloseNs int64 `json:"closeNs"`
	Batches int64 `json:"batches"`
	// MaxBacklog is the largest number of acknowledged records waiting for the index seen
	// during the appends (sampled every 250 ms); PeakRSSKiB the largest RSS of the process
	// growing the ledger.
	MaxBacklog int   `json:"maxBacklog"`
	PeakRSSKiB int64 `json:"peakRSSKiB"`
}

// growLedger opens the ledger in dir, appends the pool's Rotated records if it is empty, then
// generated records from growCallers goroutines until it holds n records (or ctx ends), which
// smp samples, and closes it.
func growLedger(ctx context.Context, dir string, pool *ledgerPool, n int, smp *sampler) (growResult, error) {
	var res growResult
	t0 := time.Now()
	l, err := ledger.Open(dir, ledger.Options{Clock: testclock.NewFakePassiveClock(pool.Clock)})
	if err != nil {
		return res, fmt.Errorf("growing the ledger to %d records: %w", n, err)
	}
	res.OpenNs = int64(time.Since(t0))
	if seq, _ := l.Last(); seq == 0 && n > 0 {
		for _, r := range pool.Rotated {
			if _, err := l.Append(ctx, r); err != nil {
				l.Close()
				return res, fmt.Errorf("growing the ledger to %d records: %w", n, err)
			}
		}
	}
	seq, _ := l.Last()
	var left atomic.Int64
	left.Store(int64(n) - int64(seq))
	stop := sampleGrowth(l, &res)
	t1 := time.Now()
	added, err := appendLoop(pool, growCallers, func() bool { return ctx.Err() == nil && left.Add(-1) >= 0 }, func(r ledger.Record) error {
		r, err := l.Append(ctx, r)
		if err == nil {
			smp.add(r.Seq, r.Serial)
		}
		return err
	})
	res.Ns = int64(time.Since(t1))
	stop()
	if err == nil {
		err = ctx.Err()
	}
	st := l.Stats()
	last, _ := l.Last()
	res.Records, res.Seq, res.Batches = int64(st.Records), int64(last), int64(st.Batches)
	t2 := time.Now()
	if cerr := l.Close(); err == nil && cerr != nil {
		err = cerr
	}
	res.CloseNs = int64(time.Since(t2))
	if err != nil {
		return res, fmt.Errorf("growing the ledger to %d records: %w", n, err)
	}
	fmt.Fprintf(os.Stderr, "ledger scale: %d records appended in %s (%.0f/s, %.0f per fsync), close %s, index backlog up to %d, RSS up to %.0f MiB\n",
		added, time.Duration(res.Ns).Round(time.Millisecond), float64(added)/time.Duration(res.Ns).Seconds(), float64(st.Records)/float64(max(st.Batches, 1)),
		time.Duration(res.CloseNs).Round(time.Millisecond), res.MaxBacklog, float64(res.PeakRSSKiB)/1024)
	return res, nil
}

// sampleGrowth samples the index backlog of l and the process's RSS every 250 ms into res
// until the returned stop is called.
func sampleGrowth(l *ledger.Ledger, res *growResult) (stop func()) {
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(quit)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			res.MaxBacklog = max(res.MaxBacklog, l.Stats().Unindexed)
			if st, err := readProcStatus(); err == nil {
				res.PeakRSSKiB = max(res.PeakRSSKiB, st.RSS)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-quit }
}

// samplesFile is the lookups' targets in the work directory, beside the ledgers.
const samplesFile = "samples.json"

// sampleSize is the number of records sampled for the lookups.
const sampleSize = 4 * lookupsPerRun

// sample is one generated record's seq and serial.
type sample struct {
	Seq    uint64 `json:"seq"`
	Serial string `json:"serial"`
}

// sampler keeps a uniform random sample of the records generated so far, across every growth
// (reservoir sampling, algorithm R): the targets of the children's lookups by serial, known
// without reading the ledger (which would bring their pages into the page cache before the
// cold run). The measurements' own records are not in it.
type sampler struct {
	mu   sync.Mutex
	rng  *rand.Rand
	seen uint64
	keep []sample
}

func newSampler() *sampler { return &sampler{rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))} }

// add offers a record to the sample.
func (s *sampler) add(seq uint64, serial string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen++
	if len(s.keep) < sampleSize {
		s.keep = append(s.keep, sample{seq, serial})
	} else if j := s.rng.Uint64N(s.seen); j < sampleSize {
		s.keep[j] = sample{seq, serial}
	}
}

// write stores the sample in path.
func (s *sampler) write(path string) error {
	s.mu.Lock()
	b, err := json.Marshal(s.keep)
	s.mu.Unlock()
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("writing the lookups' targets to %s: %w", path, err)
	}
	return nil
}

// readSamples reads the sample in path.
func readSamples(path string) ([]sample, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the lookups' targets: %w", err)
	}
	var out []sample
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("reading the lookups' targets in %s: %w", path, err)
	}
	return out, nil
}
