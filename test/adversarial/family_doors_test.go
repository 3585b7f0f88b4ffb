package adversarial

import (
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// doorCases: requests with a part absent (requester, object, pod), and control characters in
// the requester's and the object's strings, which no Kubernetes client sends: each is
// MALFORMED_REQUEST naming the field, recorded, and nothing is issued (issue 38).
func doorCases(c *corpus) {
	const f = "doors"
	legacy := baseFor(signerLegacy)
	csr := func(name, field string, edit func(*signetv1.SignCertificateSigningRequestRequest)) {
		r := legacy.call(c, nil)
		edit(r)
		c.sign(f, "csr/"+name, clientWatcher, r, malformed(field))
	}
	csr("requester absent", "requester is required", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Requester = nil })
	csr("object absent", "object is required", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Object = nil })
	const ctl = "holds the control character"
	for _, tc := range []struct {
		name, field string
		edit        func(*signetv1.SignCertificateSigningRequestRequest)
	}{
		{"username with NUL", "requester.username " + ctl + " U+0000", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Requester.Username = "system:node:n1\x00" }},
		{"username with CR LF BEL", "requester.username " + ctl + " U+000D", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Requester.Username = "alice\r\n\x07"
		}},
		{"username with DEL", "requester.username " + ctl + " U+007F", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Requester.Username = "alice\x7f" }},
		{"username with C1 NEL", "requester.username " + ctl + " U+0085", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Requester.Username = "alice\u0085" }},
		{"requester uid with ESC", "requester.uid " + ctl + " U+001B", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Requester.Uid = "u\x1b[2K" }},
		{"group with LF", "requester.groups[1] " + ctl + " U+000A", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Requester.Groups = []string{"system:authenticated", "system:masters\nsystem:nodes"}
		}},
		{"extra key with ESC", "a requester.extra key " + ctl + " U+001B", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Requester.Extra = map[string]*signetv1.ExtraValue{"example.com/k\x1b": {Values: []string{"v"}}}
		}},
		{"extra value with NUL", `requester.extra["example.com/k"][0] ` + ctl + " U+0000", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Requester.Extra = map[string]*signetv1.ExtraValue{"example.com/k": {Values: []string{"v\x00"}}}
		}},
		{"object name with ESC", "object.name " + ctl + " U+001B", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Object.Name = "csr-\x1b[31mred" }},
		{"object name with LF", "object.name " + ctl + " U+000A", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Object.Name = "csr\nforged log line" }},
	} {
		csr(tc.name, tc.field, tc.edit)
	}
	pod := func(name, field string, edit func(*signetv1.SignPodCertificateRequestRequest)) {
		c.add(f, "pod/"+name, clientWatcher, request{pod: c.podCall(edit)}, malformed(field))
	}
	pod("object absent", "object is required", func(r *signetv1.SignPodCertificateRequestRequest) { r.Object = nil })
	pod("pod absent", "pod is required", func(r *signetv1.SignPodCertificateRequestRequest) { r.Pod = nil })
	pod("object name with NUL", "object.name "+ctl+" U+0000", func(r *signetv1.SignPodCertificateRequestRequest) { r.Object.Name = "pcr\x00" })
	pod("pod name with ESC", "pod.pod_name "+ctl+" U+001B", func(r *signetv1.SignPodCertificateRequestRequest) { r.Pod.PodName = "web-1\x1b[2K" })
}
