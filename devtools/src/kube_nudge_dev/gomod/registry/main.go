// The CNCF distribution registry's command (registry.RootCmd: `registry serve config.yml`)
// with only the storage drivers the dev cluster's registry uses, filesystem and inmemory. The
// upstream cmd/registry also links the Azure, GCS and S3 drivers and the proxy cache, whose
// SDKs are most of its build; everything else is the pinned module as it is.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
