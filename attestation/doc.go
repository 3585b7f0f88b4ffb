// Package attestation is TPM 2.0 node attestation for kubelet certificates (seed 004, Cluster
// API "Kubelet Authentication"): the format of the evidence a node appends to its certificate
// request, the challenge that proves the node's attestation key lives in the TPM of a trusted
// endorsement key, the ticket that carries the result of that challenge into the request, and
// a pure Verify that checks all of it.
//
// This package is what the signing server and the node agent share. It does no I/O and holds
// no state: the server keeps pending challenges, spent tickets and the endorsement-key-to-node
// bindings (trust on first use) behind its own state interfaces, and the node side that talks
// to a TPM lives in attestation/nodetpm.
//
// # The protocol
//
//  1. The node sends its endorsement key (EK: the TPM2B_PUBLIC, and the EK certificate when the
//     TPM has one), its attestation key (AK: a restricted signing key, fixedTPM) and the node
//     name to the server's attestation endpoint (ChallengeRequest). The server checks the EK
//     against its manufacturer roots or allow-list and the AK's attributes (CheckKeys), and
//     answers a credential that only the TPM holding that EK can decrypt, and only while the AK
//     named in it is loaded in the same TPM (MakeChallenge: TPM2_MakeCredential done in
//     software).
//  2. The node decrypts it with TPM2_ActivateCredential and sends the secret back. The server
//     compares it and answers a ticket (Ticket, sealed with a key only the server knows):
//     single-use, short-lived, bound to the EK, the AK and the node name, and carrying a fresh
//     nonce.
//  3. The node certifies its binding key (a signing key created inside the TPM, fixedTPM and
//     fixedParent) with the AK (TPM2_Certify, the nonce as qualifying data), and signs with
//     the binding key a digest of the nonce and the request's public key (BindingDigest). The
//     kubelet's own key is a software key: client-go's exec credential protocol hands the
//     kubelet a PEM private key, so a key that never leaves the TPM cannot be the kubelet's TLS
//     key. The binding signature is what ties that key, in this one request, to the TPM.
//  4. The request carries the evidence in two PEM blocks after the CERTIFICATE REQUEST block
//     (BlockProvider, BlockData) and the node's provider ID in the request extension
//     OIDProviderID. The server runs Verify, then spends the ticket and checks the EK's
//     binding to the node name.
package attestation
