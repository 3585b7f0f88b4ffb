package signetv1

// SignerHealthService is the grpc.health.v1 service name under which the server reports one
// signer: SERVING while the server can record decisions and the signer's active CA key can
// sign, NOT_SERVING while its HSM or TPM cannot be reached. A client that uses one signer
// checks it (signerclient's HealthService option) to fail over to another endpoint.
func SignerHealthService(signer string) string { return HealthService + "/" + signer }
