package config

import (
	"fmt"
	"os"
	"reflect"

	"github.com/signet-pki/signet/internal/configfile"
	"github.com/signet-pki/signet/server/config/fieldscan"
)

// decode reads the file at path into a Config, strictly (configfile.Decode). The durations
// are scanned first (fieldscan.Durations): when some are wrong, they are returned, each with
// its field path and line, and the rest of the document is decoded without them, so that
// every other problem is reported too.
func decode(path string) (*Config, []error, error) {
	var cfg Config
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	cleaned, durationErrs := fieldscan.Durations(data, reflect.TypeFor[Config]())
	if cleaned == nil {
		if err := configfile.Decode(path, APIVersion, Kind, &cfg); err != nil {
			return nil, durationErrs, err
		}
		return &cfg, durationErrs, nil
	}
	if err := fieldscan.DecodeStrict(cleaned, fieldscan.Lines(data), &cfg); err != nil {
		return nil, durationErrs, err
	}
	if cfg.APIVersion != APIVersion || cfg.Kind != Kind {
		return nil, durationErrs, fmt.Errorf("apiVersion/kind is %q/%q, want %q/%q", cfg.APIVersion, cfg.Kind, APIVersion, Kind)
	}
	return &cfg, durationErrs, nil
}
