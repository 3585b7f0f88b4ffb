package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// The output formats of -o.
const (
	formatText = "text"
	formatJSON = "json"
	formatYAML = "yaml"
)

// outputFlag is the -o/--output flag of a command that prints data.
type outputFlag struct {
	format string
}

// addOutputFlag adds -o/--output to cmd; jsonIs says what the JSON holds, for the help.
func addOutputFlag(cmd *cobra.Command, jsonIs string) *outputFlag {
	o := &outputFlag{}
	cmd.Flags().StringVarP(&o.format, "output", "o", formatText, "output `format`: text, json or yaml ("+jsonIs+")")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{formatText, formatJSON, formatYAML}, cobra.ShellCompDirectiveNoFileComp))
	return o
}

// check validates the format; an unknown one is a usage error of cmd.
func (o *outputFlag) check(cmd *cobra.Command) error {
	switch o.format {
	case formatText, formatJSON, formatYAML:
		return nil
	}
	return usageError(cmd, "--output must be text, json or yaml, not %q", o.format)
}

// text reports whether the output is for people.
func (o *outputFlag) text() bool { return o.format == formatText }

// print writes v as JSON or YAML: a proto.Message as protojson, anything else with
// encoding/json; YAML is converted from that JSON, so both carry the same field names.
func (o *outputFlag) print(w io.Writer, v any) error {
	var (
		data []byte
		err  error
	)
	if m, ok := v.(proto.Message); ok {
		data, err = protojson.Marshal(m)
	} else {
		data, err = json.Marshal(v)
	}
	if err != nil {
		return failure("encoding the output: %v", err)
	}
	if o.format == formatYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return failure("encoding the output: %v", err)
		}
		_, err = w.Write(data)
		return err
	}
	// Re-indented with encoding/json so the output is stable (protojson varies its whitespace).
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return failure("encoding the output: %v", err)
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}

// terminalWidth is the width to wrap text written to w: $COLUMNS, else the terminal's width,
// else 100; never below 40.
func terminalWidth(w io.Writer) int {
	width := 100
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		width = n
	} else if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if n, _, err := term.GetSize(int(f.Fd())); err == nil && n > 0 {
			width = n
		}
	}
	return max(width, 40)
}

// wrap breaks text into lines of at most width runes (longer words stay whole). Newlines in
// text start new lines.
func wrap(text string, width int) []string {
	var lines []string
	for para := range strings.SplitSeq(text, "\n") {
		words := strings.Fields(para)
		if len(words) == 0 {
			lines = append(lines, "")
			continue
		}
		line := words[0]
		for _, w := range words[1:] {
			if len([]rune(line))+1+len([]rune(w)) > width {
				lines = append(lines, line)
				line = w
				continue
			}
			line += " " + w
		}
		lines = append(lines, line)
	}
	return lines
}

// writeWrapped prints first followed by text wrapped to width, continuation lines indented by
// indent spaces (first is expected to be indent runes wide).
func writeWrapped(w io.Writer, first string, text string, indent, width int) {
	lines := wrap(text, max(width-indent, 20))
	pad := strings.Repeat(" ", indent)
	for i, l := range lines {
		if i == 0 {
			fmt.Fprintf(w, "%s%s\n", first, l)
		} else {
			fmt.Fprintf(w, "%s%s\n", pad, l)
		}
	}
}
