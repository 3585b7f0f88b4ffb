package version

import (
	"fmt"
	"strings"
)

// MinorSkew is how many minor versions older than itself a signing server accepts its clients
// (the watcher, signetctl and every tool built on signerclient) to be. The skew policy
// (docs/compatibility.md), which CheckSkew decides:
//
//   - a server accepts a client of its own major version whose minor version is its own or
//     up to MinorSkew older: a v0.3.x server accepts v0.3.x and v0.2.x clients, any patch
//     level of either;
//   - it never accepts a newer client (a newer minor or major): a newer client may send fields
//     an older server does not know and would silently drop;
//   - it accepts no client of an older major version (a new major version's release notes say
//     whether it makes an exception for the last minor of the one before);
//   - a development build on either side (IsDevelopment: nothing or a bare commit stamped) is
//     accepted, and both sides log a warning, so that tests and `make demo` work from an
//     untagged checkout;
//   - a client that sends no version (grpcurl, a client in another language) is not checked.
//
// So servers are upgraded first, then clients, one minor version at a time.
const MinorSkew = 1

// Verdict is the skew policy's answer for one server and one client version.
type Verdict int

const (
	// Supported: the client's release line is one the server accepts.
	Supported Verdict = iota
	// Development: the server or the client is a development build; accepted with a warning.
	Development
	// ClientTooOld: the client is more than MinorSkew minor versions older than the server, or
	// of an older major version; refused.
	ClientTooOld
	// ClientTooNew: the client is newer than the server; refused.
	ClientTooNew
)

// String names the verdict, for logs: supported, development, client_too_old, client_too_new.
func (v Verdict) String() string {
	switch v {
	case Supported:
		return "supported"
	case Development:
		return "development"
	case ClientTooOld:
		return "client_too_old"
	case ClientTooNew:
		return "client_too_new"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Skew is CheckSkew's answer: the two versions and the verdict.
type Skew struct {
	Server, Client string
	Verdict        Verdict
}

// CheckSkew applies the skew policy (MinorSkew) to a server of version server and a client of
// version client, each as Info.Version holds it.
func CheckSkew(server, client string) Skew {
	s := Skew{Server: server, Client: client}
	sv, serr := Parse(server)
	cv, cerr := Parse(client)
	switch {
	case serr != nil || cerr != nil:
		s.Verdict = Development
	case cv.Major > sv.Major || (cv.Major == sv.Major && cv.Minor > sv.Minor):
		s.Verdict = ClientTooNew
	case cv.Major < sv.Major || cv.Minor < sv.Minor-MinorSkew:
		s.Verdict = ClientTooOld
	default:
		s.Verdict = Supported
	}
	return s
}

// Accepted reports whether the server takes the client's calls: Supported or Development.
func (s Skew) Accepted() bool { return s.Verdict == Supported || s.Verdict == Development }

// Message says what the verdict means, for the server's refusal and both sides' logs: the two
// versions, the rule, and what to do. Empty for Supported.
func (s Skew) Message() string {
	switch s.Verdict {
	case Development:
		var dev []string
		if IsDevelopment(s.Server) {
			dev = append(dev, fmt.Sprintf("signet-server %s", s.Server))
		}
		if IsDevelopment(s.Client) {
			dev = append(dev, fmt.Sprintf("client %s", s.Client))
		}
		return fmt.Sprintf("%s: a development build, so signet-server %s and client %s are not checked against the skew policy; "+
			"run released versions in production (docs/compatibility.md)", strings.Join(dev, " and "), s.Server, s.Client)
	case ClientTooOld:
		return fmt.Sprintf("signet-server %s does not accept clients of version %s: a server accepts clients of its own minor version "+
			"and of the %s before it (%s), never newer ones; upgrade the client to one of those (docs/compatibility.md)",
			s.Server, s.Client, minorsWord(), acceptedLines(s.Server))
	case ClientTooNew:
		return fmt.Sprintf("signet-server %s does not accept clients of version %s, newer than itself (a newer client may send fields "+
			"an older server does not know): it accepts %s; upgrade the signing servers first, then the clients (docs/compatibility.md)",
			s.Server, s.Client, acceptedLines(s.Server))
	}
	return ""
}

// AcceptedLines lists the release lines (vMAJOR.MINOR) whose clients a server of version
// server accepts, its own first; nil for a development build, which accepts any.
func AcceptedLines(server string) []string {
	sv, err := Parse(server)
	if err != nil {
		return nil
	}
	var lines []string
	for minor := sv.Minor; minor >= 0 && minor >= sv.Minor-MinorSkew; minor-- {
		lines = append(lines, Semver{Major: sv.Major, Minor: minor}.MajorMinor())
	}
	return lines
}

// acceptedLines is AcceptedLines written for a message: "v0.3.x or v0.2.x".
func acceptedLines(server string) string {
	lines := AcceptedLines(server)
	for i := range lines {
		lines[i] += ".x"
	}
	return strings.Join(lines, " or ")
}

// minorsWord is "minor version" or "N minor versions", for MinorSkew in a message.
func minorsWord() string {
	if MinorSkew == 1 {
		return "minor version"
	}
	return fmt.Sprintf("%d minor versions", MinorSkew)
}
