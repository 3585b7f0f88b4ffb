package access

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Which limit refused a request, as Limiter.Allow reports it. They are also the values of
// the "limit" metric label.
const (
	LimitClient = "client"
	LimitSigner = "signer"
)

// Rate is a token-bucket rate limit: PerSecond tokens are added per second, up to Burst.
type Rate struct {
	// PerSecond is the sustained rate; it must be positive and finite.
	PerSecond float64 `json:"perSecond"`
	// Burst is the bucket size: how many requests may arrive at once. Zero means
	// PerSecond rounded up (at least 1).
	Burst int `json:"burst"`
}

// Validate reports why r cannot be used as a limit.
func (r Rate) Validate() error {
	var errs []error
	if !(r.PerSecond > 0) || math.IsInf(r.PerSecond, 0) {
		errs = append(errs, fmt.Errorf("perSecond %v must be a positive number (leave the limit out for none)", r.PerSecond))
	}
	if r.Burst < 0 {
		errs = append(errs, fmt.Errorf("burst %d is negative", r.Burst))
	}
	return errors.Join(errs...)
}

// burst is Burst with its default applied.
func (r Rate) burst() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, int(math.Ceil(r.PerSecond)))
}

// ClientRates returns the configured rate limit of every client that has one, keyed by
// identity, ready for NewLimiter.
func ClientRates(clients []Client) map[string]Rate {
	out := make(map[string]Rate)
	for _, c := range clients {
		if c.RateLimit != nil {
			out[c.Identity] = *c.RateLimit
		}
	}
	return out
}

// Limiter applies token-bucket limits per client identity and per signer name. A client or
// signer without a configured Rate is not limited. The set of buckets is fixed at
// construction (a reload builds a new Limiter, starting with full buckets). Limiter is safe
// for concurrent use; a nil *Limiter allows everything.
type Limiter struct {
	clock   clock.PassiveClock
	clients map[string]*rate.Limiter
	signers map[string]*rate.Limiter
}

// NewLimiter builds a Limiter from per-client (keyed by identity) and per-signer (keyed by
// signer name) rates. A nil clk means the real clock. Every invalid rate is reported,
// naming its key.
func NewLimiter(perClient, perSigner map[string]Rate, clk clock.PassiveClock) (*Limiter, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	clients, errClients := buckets("client", perClient)
	signers, errSigners := buckets("signer", perSigner)
	if err := errors.Join(errClients, errSigners); err != nil {
		return nil, fmt.Errorf("building rate limiter: %w", err)
	}
	return &Limiter{clock: clk, clients: clients, signers: signers}, nil
}

// buckets builds one rate.Limiter per key, reporting invalid rates in key order.
func buckets(kind string, rates map[string]Rate) (map[string]*rate.Limiter, error) {
	out := make(map[string]*rate.Limiter, len(rates))
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(rates)) {
		r := rates[key]
		if err := r.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", kind, key, err))
			continue
		}
		out[key] = rate.NewLimiter(rate.Limit(r.PerSecond), r.burst())
	}
	return out, errors.Join(errs...)
}

// Allow takes one token from the client's bucket, then calls authorize (when not nil), then
// takes one token from the signer's bucket:
//   - the client's bucket is empty: false, LimitClient, nil; nothing is taken;
//   - authorize fails: false, "", its error; the client's token stays spent (a refused call
//     costs the caller its own budget, so that it cannot flood the service with refusals) and
//     the signer's shared bucket is not touched, so no client can spend, or learn the state
//     of, the budget of a signer it may not use;
//   - the signer's bucket is empty: false, LimitSigner, nil; the client's token is given back.
//
// Otherwise it returns true. Concurrent calls are safe; under contention a call may briefly
// see a token that another call is about to give back, and be refused.
func (l *Limiter) Allow(identity, signer string, authorize func() error) (ok bool, which string, err error) {
	if l == nil {
		l = unlimited
	}
	now := l.clock.Now()
	client, ok := take(l.clients[identity], now)
	if !ok {
		return false, LimitClient, nil
	}
	if authorize != nil {
		if err := authorize(); err != nil {
			return false, "", err
		}
	}
	if _, ok := take(l.signers[signer], now); !ok {
		client.cancel()
		return false, LimitSigner, nil
	}
	return true, "", nil
}

// AllowClient takes one token from the client's bucket only, then calls authorize (when not
// nil): for calls that are not issuance (trust bundle reports, CA rotation steps), which must
// not spend a signer's shared issuance budget but must not flood the service either. It
// returns false and nil when the client's bucket is empty, false and authorize's error when
// that fails (the token stays spent), true otherwise.
func (l *Limiter) AllowClient(identity string, authorize func() error) (bool, error) {
	if l == nil {
		l = unlimited
	}
	if _, ok := take(l.clients[identity], l.clock.Now()); !ok {
		return false, nil
	}
	if authorize != nil {
		if err := authorize(); err != nil {
			return false, err
		}
	}
	return true, nil
}

// unlimited is what a nil *Limiter limits by: no bucket, so nothing.
var unlimited = &Limiter{clock: clock.RealClock{}}

// reservation is a token taken from a bucket that can be given back.
type reservation struct {
	r   *rate.Reservation
	now time.Time
}

// cancel gives the token back. It does nothing for an unlimited bucket.
func (r reservation) cancel() {
	if r.r != nil {
		r.r.CancelAt(r.now)
	}
}

// take takes one token from lim at now if one is available without waiting. A nil lim is
// unlimited. On refusal nothing stays taken.
func take(lim *rate.Limiter, now time.Time) (reservation, bool) {
	if lim == nil {
		return reservation{}, true
	}
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return reservation{}, false
	}
	if r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return reservation{}, false
	}
	return reservation{r: r, now: now}, true
}
