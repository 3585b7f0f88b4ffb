package tlspki

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Options describe the PKI New makes.
type Options struct {
	// ServerNames are the DNS names of the signing server (at least one): the SANs of its
	// certificate, the first also its common name. The watcher's server.address must use one.
	ServerNames []string
	// ServerIPs are further IP address SANs of the server certificate, as text.
	ServerIPs []string
	// WatcherIdentity is the watcher's identity as the server's clients[].identity lists it:
	// an absolute URI (spiffe://trust-domain/path), the only URI SAN of its certificate.
	WatcherIdentity string
	// Cluster is the watcher's clusterName, recorded for the summary. Default "default".
	Cluster string
	// Validity is the lifetime of the server and client certificates. Default 90 days.
	Validity time.Duration
	// CAValidity is the lifetime of the CAs. Default ten years.
	CAValidity time.Duration
	// Algorithm is the algorithm of every key (one of Algorithms). Default P-256.
	Algorithm string
	// Namespace and SecretName are where the watcher's Secret goes. Defaults signet-system
	// and signet-watcher-tls.
	Namespace, SecretName string
	// Now is the issuing time. Default time.Now().
	Now time.Time
}

// Default fills in every unset field that has a default.
func (o *Options) Default() {
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	if o.Validity == 0 {
		o.Validity = DefaultValidity
	}
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.Algorithm == "" {
		o.Algorithm = DefaultAlgorithm
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
}

// Validate reports every problem of the (defaulted) options at once, each naming its flag.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(o.ServerNames) == 0 {
		add("--server-name: required: the DNS name(s) the watcher dials the server at (its server.address)")
	}
	for _, n := range o.ServerNames {
		if err := checkServerName(n); err != nil {
			add("--server-name %q: %v", n, err)
		}
	}
	for _, ip := range o.ServerIPs {
		if _, err := parseIP(ip); err != nil {
			add("--server-ip %q: %v", ip, err)
		}
	}
	if o.WatcherIdentity == "" {
		add("--watcher-identity: required: the URI the server's clients[].identity lists, e.g. spiffe://prod.example.com/ns/signet-system/sa/signet-watcher")
	} else if _, err := ParseIdentity(o.WatcherIdentity); err != nil {
		add("--watcher-identity %q: %v", o.WatcherIdentity, err)
	}
	for _, p := range validation.IsDNS1123Label(o.Cluster) {
		add("--cluster %q: %s (a DNS-1123 label, as the watcher's clusterName)", o.Cluster, p)
	}
	for _, p := range validation.IsDNS1123Label(o.Namespace) {
		add("--namespace %q: %s", o.Namespace, p)
	}
	for _, p := range validation.IsDNS1123Subdomain(o.SecretName) {
		add("--secret-name %q: %s", o.SecretName, p)
	}
	if !slices.Contains(Algorithms, o.Algorithm) {
		add("--algorithm %q: want one of %s", o.Algorithm, strings.Join(Algorithms, ", "))
	}
	if o.Validity < MinValidity {
		add("--validity %s: below the %s minimum", FormatLifetime(o.Validity), FormatLifetime(MinValidity))
	}
	if o.CAValidity <= o.Validity {
		add("--ca-validity %s: must be longer than --validity %s (a certificate never outlives its CA)", FormatLifetime(o.CAValidity), FormatLifetime(o.Validity))
	}
	return errors.Join(errs...)
}

// checkServerName accepts a lower-case DNS name (RFC 1123 subdomain, no wildcard).
func checkServerName(n string) error {
	if _, err := netip.ParseAddr(n); err == nil {
		return errors.New("is an IP address: give it with --server-ip")
	}
	if n != strings.ToLower(n) {
		return fmt.Errorf("must be lower case (%q)", strings.ToLower(n))
	}
	if p := validation.IsDNS1123Subdomain(n); len(p) > 0 {
		return errors.New(strings.Join(p, "; "))
	}
	return nil
}

// parseIP parses an IP address without zone; an IPv4-mapped IPv6 address becomes IPv4.
func parseIP(s string) (net.IP, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return nil, errors.New("is not an IP address")
	}
	if a.Zone() != "" {
		return nil, errors.New("has a zone")
	}
	return net.IP(a.Unmap().AsSlice()), nil
}

// spiffeSegment is one path segment of a SPIFFE ID; spiffeTrustDomain its trust domain.
var (
	spiffeSegment     = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	spiffeTrustDomain = regexp.MustCompile(`^[a-z0-9._-]+$`)
)

// ParseIdentity parses a client identity URI as a certificate carries it and the server
// compares it: absolute with a host (scheme://host/...), written exactly as Go renders it
// (the server refuses clients[].identity otherwise), without user information, query,
// fragment or dot segments (which Signet's custom profiles refuse in a URI SAN). A spiffe://
// identity must also be a SPIFFE ID: a lower-case trust domain without port and a non-empty
// path of segments of letters, digits, ".", "-" and "_".
func ParseIdentity(id string) (*url.URL, error) {
	u, err := url.Parse(id)
	switch {
	case err != nil:
		return nil, fmt.Errorf("is not a URI: %v", errors.Unwrap(err))
	case u.Scheme == "" || u.Host == "" || u.Opaque != "":
		return nil, errors.New("must be an absolute URI with a host, e.g. spiffe://prod.example.com/ns/signet-system/sa/signet-watcher")
	case u.User != nil:
		return nil, errors.New("must not hold user information")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, errors.New("must not have a query")
	case u.Fragment != "" || strings.Contains(id, "#"):
		return nil, errors.New("must not have a fragment")
	case u.String() != id:
		return nil, fmt.Errorf("is not written as certificates render it: write %q", u.String())
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/")[1:] {
		if seg == "." || seg == ".." {
			return nil, errors.New("must not have dot segments")
		}
	}
	if u.Scheme == "spiffe" {
		if !spiffeTrustDomain.MatchString(u.Host) {
			return nil, fmt.Errorf("SPIFFE trust domain %q: lower-case letters, digits, \".\", \"-\" and \"_\" only, no port", u.Host)
		}
		if u.Path == "" || u.Path == "/" {
			return nil, errors.New("a SPIFFE ID needs a path, e.g. /ns/signet-system/sa/signet-watcher")
		}
		for _, seg := range strings.Split(u.EscapedPath(), "/")[1:] {
			if !spiffeSegment.MatchString(seg) {
				return nil, fmt.Errorf("SPIFFE ID path segment %q: letters, digits, \".\", \"-\" and \"_\" only, not empty", seg)
			}
		}
	}
	return u, nil
}

// PKI is a TLS PKI for one signing server and one watcher.
type PKI struct {
	// ServerCA signs the server certificate; ClientCA signs client certificates.
	ServerCA, ClientCA *KeyPair
	// Server is the server's certificate; Watcher the watcher's client certificate.
	Server, Watcher *KeyPair
	// Record is what pki renew needs besides the certificates.
	Record Record
}

// New makes a PKI as opts describe; opts are defaulted and validated first.
func New(opts Options) (*PKI, error) {
	opts.Default()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	identity, _ := ParseIdentity(opts.WatcherIdentity)
	ips := make([]net.IP, 0, len(opts.ServerIPs))
	for _, s := range opts.ServerIPs {
		ip, _ := parseIP(s)
		if !slices.ContainsFunc(ips, ip.Equal) {
			ips = append(ips, ip)
		}
	}
	var names []string
	for _, n := range opts.ServerNames {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	serverCA, err := newCA("Signet server TLS CA", opts.Algorithm, opts.Now, opts.CAValidity)
	if err != nil {
		return nil, err
	}
	clientCA, err := newCA("Signet client CA", opts.Algorithm, opts.Now, opts.CAValidity)
	if err != nil {
		return nil, err
	}
	server, _, err := serverCA.issue(serverTemplate(names, ips), opts.Algorithm, opts.Now, opts.Validity)
	if err != nil {
		return nil, fmt.Errorf("making the server certificate: %w", err)
	}
	watcher, _, err := clientCA.issue(watcherTemplate(identity), opts.Algorithm, opts.Now, opts.Validity)
	if err != nil {
		return nil, fmt.Errorf("making the watcher's client certificate: %w", err)
	}
	return &PKI{
		ServerCA: serverCA, ClientCA: clientCA, Server: server, Watcher: watcher,
		Record: newRecord(opts.Cluster, opts.Namespace, opts.SecretName),
	}, nil
}

// FormatLifetime writes d in whole days ("90d") when it is a number of days, else as a Go
// duration ("36h", "90m"), without trailing zero units.
func FormatLifetime(d time.Duration) string {
	const day = 24 * time.Hour
	if d != 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
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
