package keystore

import (
	"context"
	"regexp"
)

// backends open the keys of each device scheme.
var backends = map[string]func(ctx context.Context, uri string, opts Options) (Key, error){}

// pinValue matches a pin-value attribute and its value in a PKCS#11 URI.
var pinValue = regexp.MustCompile(`(?i)(pin-value=)[^&;]*`)

// redact returns uri with any pin-value replaced, fit for errors and logs.
func redact(uri string) string {
	return pinValue.ReplaceAllString(uri, "${1}REDACTED")
}

// Redact is redact for other packages: uri with any PIN it carries replaced.
func Redact(uri string) string { return redact(uri) }
