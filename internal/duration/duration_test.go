package duration

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string // a part of the error; "" for success
	}{
		{"3650d", 3650 * 24 * time.Hour, ""},
		{"87600h", 87600 * time.Hour, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"90d", 90 * 24 * time.Hour, ""},
		{"1d", 24 * time.Hour, ""},
		{"007d", 7 * 24 * time.Hour, ""},
		{"1s", time.Second, ""},
		{"106751d", 106751 * 24 * time.Hour, ""},
		{"0d", 0, "not positive"},
		{"0s", 0, "not positive"},
		{"0", 0, "not positive"},
		{"-1d", 0, "not positive"},
		{"-1h", 0, "not positive"},
		{"3650 d", 0, "not a whole number of days"},
		{" 3650d", 0, "not a whole number of days"},
		{"3650d ", 0, "neither"},
		{"+3650d", 0, "not a whole number of days"},
		{"1.5d", 0, "not a whole number of days"},
		{"d", 0, "not a whole number of days"},
		{"1d12h", 0, "neither"},
		{"3650", 0, "neither"},
		{"ten years", 0, "neither"},
		{"", 0, "empty"},
		{"106752d", 0, "too long: at most 106751d"},
		{"99999999999999999999d", 0, "too long"},
		{"9999999999h", 0, "neither"},
	} {
		got, err := Parse(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Parse(%q): %v", tc.in, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("Parse(%q) = %s, want %s", tc.in, got, tc.want)
		case tc.err != "" && err == nil:
			t.Errorf("Parse(%q) = %s, want an error saying %q", tc.in, got, tc.err)
		case tc.err != "" && (!strings.Contains(err.Error(), tc.err) || (tc.in != "" && !strings.Contains(err.Error(), `"`+tc.in+`"`))):
			t.Errorf("Parse(%q): error %q, want it to quote the input and say %q", tc.in, err, tc.err)
		}
	}
}

func TestFormatRoundTrips(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		3650 * Day: "3650d", 90 * Day: "90d", 36 * time.Hour: "36h", 90 * time.Minute: "1h30m",
		time.Hour: "1h", 90 * time.Second: "1m30s", 1500 * time.Millisecond: "1.5s",
	} {
		if got := Format(d); got != want {
			t.Errorf("Format(%s) = %q, want %q", d, got, want)
		}
		if back, err := Parse(Format(d)); err != nil || back != d {
			t.Errorf("Parse(Format(%s)) = %s, %v", d, back, err)
		}
	}
}

func TestValue(t *testing.T) {
	t.Parallel()
	d := 10 * 365 * Day
	v := Var(&d)
	if v.String() != "3650d" || v.Type() != "duration" {
		t.Errorf("default shows %q, type %q", v.String(), v.Type())
	}
	if err := v.Set("87600h"); err != nil || d != 87600*time.Hour {
		t.Errorf("Set(87600h): %s, %v", d, err)
	}
	if err := v.Set("-1d"); err == nil || d != 87600*time.Hour {
		t.Errorf("Set(-1d) = %v and left %s, want an error and the value unchanged", err, d)
	}
	var zero time.Duration
	if s := Var(&zero).String(); s != "0" {
		t.Errorf("zero shows %q", s)
	}
}
