package config

import (
	"fmt"
	"os"

	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/internal/effectorkey"
)

// KeyLabel is the name the placement key is scrubbed as.
const KeyLabel = "effector-key"

func loadKey(path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("%s: not set; point it at the placement key file", EnvKey)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %s; mount the placement key where it points", EnvKey, oserr.Why(err))
	}
	k, err := effectorkey.ParseHexKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKey, err)
	}
	return k, nil
}
