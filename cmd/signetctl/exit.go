package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/signerclient"
)

// The exit codes of every command (exitCodesHelp).
const (
	exitOK      = 0
	exitFailed  = 1 // refused by the server, a check failed, a local operation failed
	exitNoReply = 2 // usage error, unreadable input, or no answer from the server
)

// exitError ends a command with an exit code other than 0. run prints msg (when not empty)
// as "<command path>: msg" on the error stream, then the hint to the command's help for a
// usage error.
type exitError struct {
	code  int
	msg   string
	usage bool
}

func (e *exitError) Error() string { return e.msg }

// print writes the error for cmd (the command that failed) to w.
func (e *exitError) print(w io.Writer, cmd *cobra.Command) {
	if e.msg != "" {
		fmt.Fprintf(w, "%s: %s\n", cmd.CommandPath(), e.msg)
	}
	if e.usage {
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
}

// usageError is a usage error of cmd: exit 2, with a pointer to its help.
func usageError(_ *cobra.Command, format string, a ...any) error {
	return &exitError{code: exitNoReply, msg: fmt.Sprintf(format, a...), usage: true}
}

// inputError is an input that cannot be read or used (a file, stdin, a kubeconfig): exit 2.
func inputError(format string, a ...any) error {
	return &exitError{code: exitNoReply, msg: fmt.Sprintf(format, a...)}
}

// failure is a refusal, a failed check or a failed local operation: exit 1. An empty message
// prints nothing (the command already said why on its output).
func failure(format string, a ...any) error {
	return &exitError{code: exitFailed, msg: fmt.Sprintf(format, a...)}
}

// silentFailure is exit 1 without a message: the command's output said it all.
func silentFailure() error { return &exitError{code: exitFailed} }

// callError is the exit of a failed call to the server (at to.server, as to.identity): a
// refusal (a status carrying a signet.dev reason) prints "refused (REASON): message" and exits
// 1; anything else (no answer, a TLS failure, a timeout, a status without reason) is
// described by describeRPCError and exits 2.
func callError(to endpoint, err error) error {
	var carrier interface{ GRPCStatus() *status.Status }
	if errors.As(err, &carrier) && carrier.GRPCStatus() != nil {
		st := carrier.GRPCStatus()
		if reason := signetReason(st); reason != "" {
			return &exitError{code: exitFailed, msg: fmt.Sprintf("refused (%s): %s", reason, st.Message())}
		}
		var handshake *signerclient.HandshakeError
		errors.As(err, &handshake)
		return &exitError{code: exitNoReply, msg: describeRPCError(to, st.Err(), handshake)}
	}
	return &exitError{code: exitNoReply, msg: err.Error()}
}

// endpoint is who called whom, for the hints of describeRPCError.
type endpoint struct {
	// server is the address called.
	server string
	// identity is the client identity of the certificate presented (its first URI SAN, else
	// its common name), as the server reads it.
	identity string
}

// signetReason is the reason of st's first ErrorInfo of domain signet.dev, e.g.
// "ROTATION_REFUSED"; empty when there is none.
func signetReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == signetv1.ErrorDomain && info.GetReason() != "" {
			return info.GetReason()
		}
	}
	return ""
}

// describeRPCError is the one-line account of a failed call: the status code and message,
// plus the google.rpc.ErrorInfo reason when the server sent one, and a hint at the likely
// cause of a failed connection (handshake, when not nil, is the failed TLS handshake that
// caused it).
func describeRPCError(to endpoint, err error, handshake *signerclient.HandshakeError) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := fmt.Sprintf("%s: %s", st.Code(), st.Message())
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
			msg += " (reason " + info.GetReason() + ")"
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		hint := unavailableHint(to, st.Message())
		if handshake != nil {
			hint = handshakeHint(to, handshake)
		}
		msg += " [" + hint + "]"
	case codes.DeadlineExceeded:
		msg += " [no answer within --timeout]"
	}
	return msg
}

// handshakeHint names a failed TLS handshake in signetctl's terms: the flags that fix it.
func handshakeHint(to endpoint, e *signerclient.HandshakeError) string {
	who := "the client certificate"
	if to.identity != "" {
		who = fmt.Sprintf("the client certificate (identity %q)", to.identity)
	}
	switch {
	case errors.Is(e, signerclient.ErrServerCAUntrusted):
		return "untrusted server: its certificate is not signed by a CA in --tls-ca"
	case errors.Is(e, signerclient.ErrServerNameMismatch):
		return "wrong server name: the server's certificate does not name the host of --server; set --server-name to a name it holds"
	case errors.Is(e, signerclient.ErrServerCertificateInvalid):
		return "invalid server certificate: the server's TLS certificate (tls.certFile) must be renewed or reissued for server authentication, or this host's clock is off"
	case errors.Is(e, signerclient.ErrClientCertificateExpired):
		return "expired client certificate: the server refused " + who + " as expired or not yet valid; renew --tls-cert"
	case errors.Is(e, signerclient.ErrClientCAUntrusted):
		return "untrusted client certificate: " + who + " is not issued by a CA in the server's tls.clientCAFile"
	case errors.Is(e, signerclient.ErrClientCertificateUsage):
		return "wrong client certificate: " + who + " is not for client authentication; --tls-cert needs extended key usage clientAuth"
	case errors.Is(e, signerclient.ErrClientCertificateMissing):
		return "no client certificate: the server requires one; give --tls-cert and --tls-key"
	case errors.Is(e, signerclient.ErrClientNotConfigured):
		return "client not configured: the server refused " + who + "; is that identity in the server's clients? (the server logs why)"
	}
	return "client certificate refused: the server refused " + who + " (the server logs why)"
}

// unavailableHint names the likely cause of a failed connection from the message of an
// Unavailable status that is not a named handshake failure (handshakeHint): the TLS alert
// the server sent or the client's own check of the server's certificate, as the text shows
// them, else a refused or unresolved address.
func unavailableHint(to endpoint, msg string) string {
	who := "the client certificate"
	if to.identity != "" {
		who = fmt.Sprintf("the client certificate (identity %q)", to.identity)
	}
	switch {
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return "untrusted server: its certificate is not signed by a CA in --tls-ca"
	case strings.Contains(msg, "certificate is valid for"), strings.Contains(msg, "doesn't contain any IP SANs"):
		return "wrong server name: the server's certificate does not name the host of --server; set --server-name to a name it holds"
	case strings.Contains(msg, "certificate has expired or is not yet valid"):
		return "the server's certificate has expired (or this host's clock is off)"
	case strings.Contains(msg, "expired certificate"):
		return "expired client certificate: the server refused " + who + " as expired; renew --tls-cert"
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "unknown certificate authority"):
		return "untrusted client certificate: " + who + " is not issued by a CA in the server's tls.clientCAFile"
	case strings.Contains(msg, "access denied"), strings.Contains(msg, "bad certificate"):
		return "client not configured: the server refused " + who + "; is that identity in the server's clients? (the server logs why)"
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "no such host"):
		return "is signet-server running at " + to.server + "?"
	}
	return "is signet-server running at " + to.server + ", and do --tls-ca and --server-name match its certificate?"
}
