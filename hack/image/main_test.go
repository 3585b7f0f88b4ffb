package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestCreationTime(t *testing.T) {
	for _, c := range []struct {
		date, epoch string
		want        time.Time
		err         string
	}{
		{date: "2026-01-02T03:04:05Z", epoch: "1", want: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{date: "2026-01-02T04:04:05+01:00", want: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{epoch: "1767323045", want: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{date: "yesterday", err: "-commit-date"},
		{epoch: "soon", err: "SOURCE_DATE_EPOCH"},
		{err: "no commit date"},
	} {
		got, err := creationTime(c.date, c.epoch)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("creationTime(%q, %q) = %v, %v: want an error about %s", c.date, c.epoch, got, err, c.err)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("creationTime(%q, %q) = %v, %v: want %v", c.date, c.epoch, got, err, c.want)
		}
	}
}

// TestCommandsRefuseWhatTheyCannotDo: the errors a user meets before anything is built or
// pushed.
func TestCommandsRefuseWhatTheyCannotDo(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{nil, "want a command"},
		{[]string{"save"}, `unknown command "save"`},
		{[]string{"build"}, "-version is required"},
		{[]string{"build", "-version", "v1", "-commit-date", "2026-01-02T03:04:05Z", "-ca-bundle", "/nonexistent"}, "apt-get install ca-certificates"},
		{[]string{"build", "-version", "v1", "-commit-date", "2026-01-02T03:04:05Z", "-repo", "UPPER"}, "image name"},
		{[]string{"push"}, "set REGISTRY"},
		{[]string{"push", "-registry", "localhost:1", "-layout", "/nonexistent"}, "reading the OCI layout"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), c.args, &out)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("image %v: err = %v, want one about %q", c.args, err, c.err)
		}
	}
}
