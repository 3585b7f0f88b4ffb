package configcheck

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/signet-pki/signet/server/config"
)

// Signers returns, for a loaded configuration, one line per signer on its certificates'
// lifetime and the signing outage its clients ride out (Lifetime); nil when the file could not
// be decoded.
func (r Result) Signers() []string {
	if r.Config == nil {
		return nil
	}
	lines := make([]string, len(r.Config.Signers))
	for i, sc := range r.Config.Signers {
		lines[i] = Lifetime(sc)
	}
	return lines
}

// Report writes the result as signet-server --validate-config prints it and returns its exit
// code: "configuration is valid", each signer's lifetime line and every note ("note: …") on
// stdout and 0; or "invalid configuration:" and every problem, one a line with its field and
// line, on stderr and 1.
func (r Result) Report(stdout, stderr io.Writer) int {
	if !r.Valid() {
		fmt.Fprintln(stderr, "invalid configuration:")
		for _, p := range r.Problems {
			fmt.Fprintln(stderr, p)
		}
		return 1
	}
	fmt.Fprintln(stdout, "configuration is valid")
	for _, line := range r.Signers() {
		fmt.Fprintln(stdout, line)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(stdout, "note:", n)
	}
	return 0
}

// Lifetime is one line on a signer's certificate lifetime and the signing outage its clients
// ride out: kubelets (and client-go's certificate manager) renew between 70 and 90 % of a
// certificate's life, so the last tenth of the longest lifetime is what a signer may be down
// for before certificates start to expire.
func Lifetime(sc config.Signer) string {
	var life time.Duration
	if sc.MaxLifetime != nil {
		life = sc.MaxLifetime.Duration
	} else {
		life = config.DefaultMaxLifetimeFor(sc.Profile.Name)
	}
	return fmt.Sprintf("signer %s: profile %s, certificates live up to %s (never past the CA certificate's NotAfter); "+
		"clients renewing at 70–90 %% of a certificate's life ride out a signing outage of about %s",
		sc.Name, sc.Profile.Name, short(life), short((life / 10).Round(time.Minute)))
}

// short formats d without trailing zero units: "8760h", "2h24m".
func short(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	if s == "" {
		return "0s"
	}
	return s
}
