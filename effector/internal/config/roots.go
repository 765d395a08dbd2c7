package config

import (
	"crypto/x509"
	"fmt"
	"os"

	"jr2.dev/boundary/effector/internal/oserr"
)

func loadRoots(path string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if path == "" {
		return pool, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %s; mount the instance's CA bundle where it points, or unset it", EnvCAFile, oserr.Why(err))
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: holds no PEM certificate; write the instance's CA bundle there", EnvCAFile)
	}
	return pool, nil
}
