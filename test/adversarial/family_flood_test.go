package adversarial

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// explainCases: Explain runs the policy and the lint gate without signing or recording, and is
// authorized (and rate limited) as signing is.
func explainCases(c *corpus) {
	const f = "explain"
	t := c.t
	client, legacy, dev := baseFor(signerClient), baseFor(signerLegacy), baseFor(signerDev)
	explain := func(name, clientName string, r *signetv1.SignCertificateSigningRequestRequest, w want) *corpusCase {
		return c.add(f, name, clientName, request{explain: r}, w)
	}
	explain("client/valid", clientWatcher, client.call(c, nil), explained(true, ""))
	explain("client/O=system:masters", clientWatcher, client.call(c, func(r *x509.CertificateRequest) {
		r.Subject.Organization = []string{"system:masters"}
	}), explained(false, reasonPolicy))
	explain("client/node identity", clientTool, client.call(c, func(r *x509.CertificateRequest) {
		r.Subject.CommonName = "system:node:n1"
	}), explained(false, reasonPolicy))
	explain("legacy/CA:TRUE", clientWatcher, legacy.call(c, func(r *x509.CertificateRequest) {
		r.ExtraExtensions = append(r.ExtraExtensions, basicConstraints(true, true))
	}), explained(false, reasonPolicy))
	explain("legacy/flipped signature", clientWatcher, legacy.callPEM(c, testpki.BreakSignature(t, legacy.call(c, nil).Request)), explained(false, reasonBadSignature))
	explain("legacy/RSA-1024", clientWatcher, legacy.callWithKey(c, testpki.Key(t, testpki.RSA1024), nil), explained(false, reasonUnsupportedKey))
	explain("legacy/DNS name with ESC", clientWatcher, legacy.call(c, dns("x\x1by.example.com")), explained(false, reasonPolicy))
	explain("dev/CN with ESC", clientWatcher, dev.call(c, func(r *x509.CertificateRequest) { r.Subject.CommonName = "d\x1bev" }), explained(false, reasonPolicy))
	explain("custom/CN of 132 characters", clientWatcher, baseFor(signerCustom).call(c, func(r *x509.CertificateRequest) {
		r.Subject.CommonName = fmt.Sprintf("%0120d.example.com", 0)
	}), explained(false, reasonLint))
	toPod := legacy.call(c, nil)
	toPod.SignerName = signerPod
	explain("legacy request to the pod signer", clientWatcher, toPod, explained(false, reasonPolicy))
	unknown := legacy.call(c, nil)
	unknown.SignerName = "example.com/not-served"
	explain("unknown signer", clientWatcher, unknown, explainRefused(unknownSigner()))
	explain("nobody/legacy", clientNobody, legacy.call(c, nil), explainRefused(notAllowed()))
	explain("tool/kubelet-serving", clientTool, baseFor(signerServing).call(c, nil), explainRefused(notAllowed()))
}

// floodCases (issue 18, items 1 and 8): a client over its own rate limit is refused
// RATE_LIMITED while others are served, and unauthorized calls do not spend a signer's
// shared budget. The rates are so low that no token returns during the run.
func floodCases(c *corpus) {
	clientFlood(c)
	signerFlood(c)
}

// clientFlood: the flooder's bucket holds flooderRate.Burst tokens; a refused call spends one
// too (authorization comes after the client's bucket).
func clientFlood(c *corpus) {
	const f, g = "flood", "flood-client"
	custom, serving := baseFor(signerCustom), baseFor(signerServing)
	step := func(name, client string, req request, w want) { c.add(f, name, client, req, w).group = g }
	step("flooder/not allowed (token 1)", clientFlooder, request{csr: serving.call(c, nil)}, notAllowed())
	step("flooder/issued (token 2)", clientFlooder, request{csr: custom.call(c, nil)}, issued())
	step("flooder/refused CA:TRUE (token 3)", clientFlooder, request{csr: custom.call(c, func(r *x509.CertificateRequest) {
		r.ExtraExtensions = []pkix.Extension{basicConstraints(true, true)}
	})}, policy("CA"))
	step("flooder/issued (token 4)", clientFlooder, request{csr: custom.call(c, nil)}, issued())
	for i := range 16 {
		step(fmt.Sprintf("flooder/burst %02d", i+1), clientFlooder, request{csr: custom.call(c, nil)}, rateLimited())
	}
	step("flooder/Explain over the limit", clientFlooder, request{explain: custom.call(c, nil)}, rateLimited())
	step("flooder/pod over the limit", clientFlooder, request{pod: c.podCall(nil)}, rateLimited())
	unknown := custom.call(c, nil)
	unknown.SignerName = "example.com/not-served"
	step("flooder/unknown signer over the limit", clientFlooder, request{csr: unknown}, rateLimited())
	step("watcher/served during the flood", clientWatcher, request{csr: custom.call(c, nil)}, issued())
	step("tool/served during the flood", clientTool, request{csr: custom.call(c, nil)}, issued())
}

// signerFlood: clients that may not use the limited signer call it many times; its budget
// (limitedRate.Burst) is then still whole for the watcher, and spent by the watcher alone.
func signerFlood(c *corpus) {
	const f, g = "flood", "flood-signer"
	limited := baseFor(signerCustom)
	limited.signer = signerLimited
	step := func(name, client string, req request, w want) { c.add(f, name, client, req, w).group = g }
	for i := range 6 {
		step(fmt.Sprintf("nobody/limited signer %d", i+1), clientNobody, request{csr: limited.call(c, nil)}, notAllowed())
	}
	for i := range 2 {
		step(fmt.Sprintf("tool/limited signer %d", i+1), clientTool, request{csr: limited.call(c, nil)}, notAllowed())
	}
	for i := range limitedRate.Burst {
		step(fmt.Sprintf("watcher/limited signer %d", i+1), clientWatcher, request{csr: limited.call(c, nil)}, issued())
	}
	step("watcher/limited signer over its budget", clientWatcher, request{csr: limited.call(c, nil)}, rateLimited())
	step("watcher/Explain on the spent signer", clientWatcher, request{explain: limited.call(c, nil)}, rateLimited())
	step("nobody/limited signer after it is spent", clientNobody, request{csr: limited.call(c, nil)}, notAllowed())
	step("watcher/other signer still served", clientWatcher, request{csr: baseFor(signerCustom).call(c, nil)}, issued())
}
