// Build-only tool: the images images/images.json describes, put together
// with go-containerregistry (make images). A module of its own so the
// project's go.mod stays free of it; it reads the description through the
// project's own packages.
module jr2.dev/boundary/tools/images

go 1.26.6

require (
	github.com/google/go-containerregistry v0.22.1
	jr2.dev/boundary v0.0.0
)

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)

replace jr2.dev/boundary => ../..
