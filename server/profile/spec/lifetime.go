package spec

import (
	"fmt"
	"strings"
	"time"
)

// Lifetime floors, equal to server/issuance's (a test there pins them): the configuration is
// checked against them without linking the issuer.
const (
	// MinLifetime is the floor of every lifetime (issuance.MinLifetime).
	MinLifetime = 10 * time.Minute
	// PodMinLifetime is the shortest pod certificate the kube-apiserver accepts
	// (issuance.PodMinLifetime).
	PodMinLifetime = time.Hour
)

// CheckMaxLifetime checks a signer's maximum lifetime for the profile named name: at least
// MinLifetime, and at least PodMinLifetime for pod-identity (the kube-apiserver refuses
// shorter pod certificates, so a lower maximum could issue nothing). profile.New calls it;
// so does the configuration's validation, to report every error at once.
func CheckMaxLifetime(name string, maxLifetime time.Duration) error {
	if maxLifetime < MinLifetime {
		return fmt.Errorf("%s is below the %s floor", maxLifetime, shortDuration(MinLifetime))
	}
	if name == NamePodIdentity && maxLifetime < PodMinLifetime {
		return fmt.Errorf("%s is below the %s floor of pod certificates (the kube-apiserver refuses shorter ones)",
			maxLifetime, shortDuration(PodMinLifetime))
	}
	return nil
}

// shortDuration formats d without trailing zero units: "10m", "1h".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
