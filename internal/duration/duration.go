// Package duration is the one parser of the durations signetctl's flags take: whole days
// ("3650d", as certificate lifetimes are usually said) or a Go duration ("87600h", "1h30m",
// time.ParseDuration). Both forms are accepted by every duration flag, so that a lifetime
// written for one command is never refused by another.
//
// YAML configuration files (the server's, the watcher's) keep metav1.Duration, which takes
// Go durations only; this package does not change them.
package duration

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Day is the length of the "d" unit: 24 hours (no calendar, no leap seconds).
const Day = 24 * time.Hour

// MaxDays is the largest number of days a time.Duration holds (106751, about 292 years).
const MaxDays = int64(math.MaxInt64 / Day)

// Parse parses s as whole days ("90d", digits then "d", nothing else) or as a Go duration
// ("2160h", "1h30m"). The duration must be positive: "0d", "0s" and negative durations are
// refused, as are spaces, signs, fractions of a day and anything that overflows. The error
// quotes s and says which forms are accepted; the caller names the flag or field.
func Parse(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("empty: want whole days (3650d) or a Go duration (87600h, 1h30m)")
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		return parseDays(s, days)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither whole days (3650d) nor a Go duration (87600h, 1h30m)", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not positive", s)
	}
	return d, nil
}

// parseDays parses days, the digits before the "d" of s.
func parseDays(s, days string) (time.Duration, error) {
	if neg, ok := strings.CutPrefix(days, "-"); ok && neg != "" && strings.TrimLeft(neg, "0123456789") == "" {
		return 0, fmt.Errorf("%q is not positive", s)
	}
	if days == "" || strings.TrimLeft(days, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a whole number of days (3650d) nor a Go duration (87600h, 1h30m)", s)
	}
	n, err := strconv.ParseInt(days, 10, 64)
	if err != nil || n > MaxDays {
		return 0, fmt.Errorf("%q is too long: at most %dd", s, MaxDays)
	}
	if n == 0 {
		return 0, fmt.Errorf("%q is not positive", s)
	}
	return time.Duration(n) * Day, nil
}

// Format writes d as Parse reads it: whole days ("90d") when d is a positive number of days,
// else a Go duration without trailing zero units ("36h", "1h30m", "90m").
func Format(d time.Duration) string {
	if d > 0 && d%Day == 0 {
		return strconv.FormatInt(int64(d/Day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Value is a duration flag (a pflag.Value) that Parse parses: cmd.Flags().Var(duration.Var(&d),
// "lifetime", "..."). A zero duration shows as "0", so that help shows no default for it.
type Value struct{ d *time.Duration }

// Var is the flag value that stores into d; d's value is the flag's default.
func Var(d *time.Duration) Value { return Value{d} }

// String shows the duration as Format does.
func (v Value) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	return Format(*v.d)
}

// Set parses s with Parse.
func (v Value) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// Type names the value in help.
func (Value) Type() string { return "duration" }
