package access

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

const (
	clientA = "spiffe://cluster.example/a"
	clientB = "spiffe://cluster.example/b"
)

func newTestLimiter(t *testing.T, perClient, perSigner map[string]Rate) (*Limiter, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	l, err := NewLimiter(perClient, perSigner, clk)
	if err != nil {
		t.Fatalf("NewLimiter: %v", err)
	}
	return l, clk
}

// expect calls Allow and checks the answer.
func expect(t *testing.T, l *Limiter, identity, signer string, wantOK bool, wantWhich string) {
	t.Helper()
	ok, which, err := l.Allow(identity, signer, nil)
	if err != nil {
		t.Fatalf("Allow(%q, %q): %v", identity, signer, err)
	}
	if ok != wantOK || which != wantWhich {
		t.Fatalf("Allow(%q, %q) = %v, %q; want %v, %q", identity, signer, ok, which, wantOK, wantWhich)
	}
}

func TestLimiterBurstThenRefill(t *testing.T) {
	l, clk := newTestLimiter(t, map[string]Rate{clientA: {PerSecond: 2, Burst: 3}}, nil)
	for range 3 {
		expect(t, l, clientA, signerServing, true, "")
	}
	expect(t, l, clientA, signerServing, false, LimitClient)
	clk.Step(499 * time.Millisecond)
	expect(t, l, clientA, signerServing, false, LimitClient)
	clk.Step(time.Millisecond) // 0.5 s at 2/s: one token
	expect(t, l, clientA, signerServing, true, "")
	expect(t, l, clientA, signerServing, false, LimitClient)
	clk.Step(time.Hour) // refills to the burst, not beyond
	for range 3 {
		expect(t, l, clientA, signerServing, true, "")
	}
	expect(t, l, clientA, signerServing, false, LimitClient)
}

func TestLimiterClientLimitIsPerClient(t *testing.T) {
	l, _ := newTestLimiter(t, map[string]Rate{clientA: {PerSecond: 1, Burst: 1}, clientB: {PerSecond: 1, Burst: 1}}, nil)
	expect(t, l, clientA, signerServing, true, "")
	expect(t, l, clientA, signerClient, false, LimitClient) // across signers
	expect(t, l, clientB, signerServing, true, "")
	expect(t, l, clientB, signerServing, false, LimitClient)
	// A client without a configured rate is not limited.
	for range 100 {
		expect(t, l, toolID, signerServing, true, "")
	}
}

func TestLimiterSignerLimitIsShared(t *testing.T) {
	l, clk := newTestLimiter(t, nil, map[string]Rate{signerServing: {PerSecond: 1, Burst: 2}})
	expect(t, l, clientA, signerServing, true, "")
	expect(t, l, clientB, signerServing, true, "")
	expect(t, l, clientA, signerServing, false, LimitSigner)
	expect(t, l, clientB, signerServing, false, LimitSigner)
	expect(t, l, clientA, signerClient, true, "") // other signers are not limited
	clk.Step(time.Second)
	expect(t, l, clientB, signerServing, true, "")
	expect(t, l, clientA, signerServing, false, LimitSigner)
}

func TestLimiterSignerRefusalKeepsClientToken(t *testing.T) {
	l, clk := newTestLimiter(t,
		map[string]Rate{clientA: {PerSecond: 1, Burst: 1}},
		map[string]Rate{signerServing: {PerSecond: 1, Burst: 1}},
	)
	expect(t, l, clientB, signerServing, true, "") // B empties the signer's bucket
	for range 5 {
		expect(t, l, clientA, signerServing, false, LimitSigner) // A's token is given back each time
	}
	expect(t, l, clientA, signerClient, true, "") // so A still has it for another signer
	expect(t, l, clientA, signerClient, false, LimitClient)

	// And a client refusal leaves the signer's token alone.
	clk.Step(time.Second)
	expect(t, l, clientA, signerClient, true, "")
	expect(t, l, clientA, signerServing, false, LimitClient)
	expect(t, l, clientB, signerServing, true, "")
}

func TestLimiterDefaultBurst(t *testing.T) {
	l, _ := newTestLimiter(t, map[string]Rate{clientA: {PerSecond: 2.5}, clientB: {PerSecond: 0.1}}, nil)
	for range 3 { // ceil(2.5)
		expect(t, l, clientA, signerServing, true, "")
	}
	expect(t, l, clientA, signerServing, false, LimitClient)
	expect(t, l, clientB, signerServing, true, "") // at least 1
	expect(t, l, clientB, signerServing, false, LimitClient)
}

func TestLimiterNilAndEmptyAllowEverything(t *testing.T) {
	var nilLimiter *Limiter
	empty, _ := newTestLimiter(t, nil, nil)
	for range 1000 {
		expect(t, nilLimiter, clientA, signerServing, true, "")
		expect(t, empty, clientA, signerServing, true, "")
	}
}

func TestNewLimiterRefusesBadRates(t *testing.T) {
	_, err := NewLimiter(
		map[string]Rate{clientA: {PerSecond: -1}, clientB: {PerSecond: 1, Burst: -1}},
		map[string]Rate{signerServing: {}},
		nil,
	)
	if err == nil {
		t.Fatal("NewLimiter accepted negative and zero rates")
	}
	for _, want := range []string{`client "` + clientA + `": perSecond -1`, `client "` + clientB + `": burst -1`, `signer "` + signerServing + `": perSecond 0`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestClientRates(t *testing.T) {
	got := ClientRates([]Client{
		{Identity: clientA, RateLimit: &Rate{PerSecond: 1, Burst: 2}},
		{Identity: clientB},
	})
	if len(got) != 1 || got[clientA] != (Rate{PerSecond: 1, Burst: 2}) {
		t.Fatalf("ClientRates = %v", got)
	}
}

// TestLimiterConcurrent checks, under the race detector, that concurrent callers never get
// more than the burst when the clock stands still.
func TestLimiterConcurrent(t *testing.T) {
	l, _ := newTestLimiter(t,
		map[string]Rate{clientA: {PerSecond: 1, Burst: 50}, clientB: {PerSecond: 1, Burst: 50}},
		map[string]Rate{signerServing: {PerSecond: 1, Burst: 60}},
	)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for _, id := range []string{clientA, clientB} {
		for range 8 {
			wg.Go(func() {
				for range 20 {
					if ok, _, _ := l.Allow(id, signerServing, nil); ok {
						mu.Lock()
						allowed++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	if allowed > 60 {
		t.Fatalf("%d requests allowed, the signer's burst is 60", allowed)
	}
}

// TestLimiterAllowClientLeavesSignerBudget: AllowClient spends only the client's bucket (a
// report or a rotation step does not spend a signer's issuance budget), keeps the token when
// authorization fails, and a nil Limiter allows everything.
func TestLimiterAllowClientLeavesSignerBudget(t *testing.T) {
	l, _ := newTestLimiter(t,
		map[string]Rate{clientA: {PerSecond: 1, Burst: 2}},
		map[string]Rate{signerServing: {PerSecond: 1, Burst: 1}},
	)
	if ok, err := l.AllowClient(clientA, func() error { return errors.New("not allowed") }); ok || err == nil {
		t.Fatalf("AllowClient with a failing authorization = %v, %v", ok, err)
	}
	if ok, err := l.AllowClient(clientA, nil); !ok || err != nil {
		t.Fatalf("AllowClient = %v, %v; want the second token", ok, err)
	}
	if ok, err := l.AllowClient(clientA, nil); ok || err != nil {
		t.Fatalf("AllowClient past the burst = %v, %v; want refused", ok, err)
	}
	expect(t, l, clientB, signerServing, true, "") // the signer's token is still there
	var none *Limiter
	if ok, err := none.AllowClient(clientA, nil); !ok || err != nil {
		t.Fatalf("nil Limiter: %v, %v", ok, err)
	}
}
