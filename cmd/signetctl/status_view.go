package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// writeStatus prints st for people: the object, its conditions, its certificate, its Events
// and the server's ledger records.
func writeStatus(w io.Writer, st objectStatus) {
	name := st.Name
	if st.Namespace != "" {
		name = st.Namespace + "/" + st.Name
	}
	fmt.Fprintf(w, "%s %s (%s, uid %s)\n", st.Kind, name, st.APIVersion, st.UID)
	line := func(label, value string) { fmt.Fprintf(w, "  %-12s %s\n", label+":", value) }
	line("Signer", st.SignerName)
	line("Requester", orDash(st.Requester))
	line("Created", st.Created.Format(time.RFC3339))
	line("State", st.State)
	if c := st.Certificate; c != nil {
		line("Certificate", fmt.Sprintf("%s, serial %s, %s → %s; %s", c.Subject, c.SerialNumber,
			c.NotBefore.Format(time.RFC3339), c.NotAfter.Format(time.RFC3339), c.Validity))
	}

	fmt.Fprintln(w, "  Conditions:")
	if len(st.Conditions) == 0 {
		fmt.Fprintln(w, "    none")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
		for _, c := range st.Conditions {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, orDash(c.Reason), when(c.Time), oneLine(c.Message))
		}
		tw.Flush()
	}

	fmt.Fprintln(w, "  Events:")
	if len(st.Events) == 0 {
		fmt.Fprintln(w, "    none")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    TIME\tTYPE\tREASON\tFROM\tMESSAGE")
		for _, e := range st.Events {
			msg := oneLine(e.Message)
			if e.Count > 1 {
				msg += fmt.Sprintf(" (×%d)", e.Count)
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", when(e.Time), e.Type, e.Reason, orDash(e.Source), msg)
		}
		tw.Flush()
	}

	head := "  Ledger"
	if st.Ledger.Server != "" {
		head += " of " + st.Ledger.Server
	}
	fmt.Fprintln(w, head+":")
	if len(st.Ledger.Records) > 0 {
		var b strings.Builder
		writeRecordTable(&b, st.Ledger.Records)
		for l := range strings.Lines(b.String()) {
			fmt.Fprint(w, "    "+l)
		}
	}
	if st.Ledger.Note != "" {
		fmt.Fprintf(w, "    %s\n", st.Ledger.Note)
	}
}

// when formats t in UTC (RFC 3339), "-" when zero.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// oneLine joins the lines of s with spaces, for a table cell.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
