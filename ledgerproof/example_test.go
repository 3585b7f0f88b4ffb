package ledgerproof_test

import (
	"crypto/ed25519"
	"fmt"
	"log"

	"github.com/signet-pki/signet/ledgerproof"
)

// Example builds the tree of a three-record ledger, signs a checkpoint with an Ed25519 key,
// and prints the key's vkey, the signed checkpoint and the inclusion bundle of the record with
// seq 2, which an auditor then verifies. The package documentation quotes this output.
func Example() {
	seed := make([]byte, ed25519.SeedSize) // a fixed key, for a reproducible example
	key := ed25519.NewKeyFromSeed(seed)
	const origin = "signet.example/ledger"

	lines := []string{
		`{"seq":1,"decision":"issued","signer":"example.com/serving"}`,
		`{"seq":2,"decision":"refused","signer":"example.com/serving","reason":"POLICY_VIOLATION"}`,
		`{"seq":3,"decision":"issued","signer":"example.com/serving"}`,
	}
	var tree ledgerproof.Tree
	for _, l := range lines {
		if _, err := tree.Append([]byte(l + "\n")); err != nil {
			log.Fatal(err)
		}
	}

	// Server side: sign the current checkpoint and prove record seq 2 (index 1).
	signer, err := ledgerproof.NewNoteSigner(origin, key)
	if err != nil {
		log.Fatal(err)
	}
	c, err := tree.Checkpoint(origin)
	if err != nil {
		log.Fatal(err)
	}
	signed, err := ledgerproof.SignCheckpoint(c, signer)
	if err != nil {
		log.Fatal(err)
	}
	proof, err := tree.ProveInclusion(1, c.Size)
	if err != nil {
		log.Fatal(err)
	}
	bundle := ledgerproof.InclusionBundle{Index: 1, Leaf: []byte(lines[1]), Proof: proof, SignedCheckpoint: signed}
	vkey, err := ledgerproof.VerifierKey(origin, key.Public())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n\n%s\n", vkey, bundle.Marshal())

	// Auditor side: parse the printed bundle and verify it against the published key.
	verifier, err := ledgerproof.ParseVerifierKey(vkey)
	if err != nil {
		log.Fatal(err)
	}
	parsed, err := ledgerproof.ParseInclusionBundle(bundle.Marshal())
	if err != nil {
		log.Fatal(err)
	}
	verified, err := parsed.Verify(origin, verifier)
	fmt.Println("verified:", verified.Size, err)
	// Output:
	// signet.example/ledger+4d2d9824+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop
	//
	// signet-ledger-inclusion-proof v1
	// index 1
	// leaf eyJzZXEiOjIsImRlY2lzaW9uIjoicmVmdXNlZCIsInNpZ25lciI6ImV4YW1wbGUuY29tL3NlcnZpbmciLCJyZWFzb24iOiJQT0xJQ1lfVklPTEFUSU9OIn0=
	// hash KKTFVXAzqrCBcf6nl0SUstlL0CSkkjCgb6mvEblE2lA=
	// hash 8KusiFo+4zszlZDJWGC7rcPMaU6nUiZ9SAZjV8+CsvA=
	// checkpoint
	// signet.example/ledger
	// 3
	// p4whS61Sv3Xt+d35S3AYujsdm+gbtQs68p+IgFhwLlM=
	//
	// — signet.example/ledger TS2YJJkMcf/1xpjAWG3IB+dgVSTtre26aFJ7uSAPKA8WM24ScZ0BFzilg1v/uLQb1rZk0nRKQCSmbV6BNzk53ilHpA8=
	//
	// verified: 3 <nil>
}
