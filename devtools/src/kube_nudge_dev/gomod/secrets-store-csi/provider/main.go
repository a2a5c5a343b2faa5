// Command provider is a Secrets Store CSI driver provider for tests: it serves secrets from
// a JSON file, read again at every mount, so a test rotates a secret by rewriting the file.
// It speaks the driver's provider API (provider/v1alpha1 of the pinned driver module) on
// <dir>/<name>.sock, where the driver looks for the provider a SecretProviderClass names.
//
// The file: {"<object name>": {"version": "<version>", "content": "<content>"}, ...}.
// A SecretProviderClass picks objects with parameter `objects`, a YAML list of
// `objectName: <name>` entries (the form the Vault and e2e providers take); each is written
// to the file <name> with the version the file gives it, its id being its name.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"
	"sigs.k8s.io/yaml"
)

type secret struct {
	Version string `json:"version"`
	Content string `json:"content"`
}

type provider struct {
	v1alpha1.UnimplementedCSIDriverProviderServer
	secrets string // the JSON file
}

func (p *provider) Version(context.Context, *v1alpha1.VersionRequest) (*v1alpha1.VersionResponse, error) {
	return &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: "kube-nudge-dev-files", RuntimeVersion: "1"}, nil
}

// wanted is the object names of the class's `objects` parameter.
func wanted(attributes string) ([]string, error) {
	var params map[string]string
	if err := json.Unmarshal([]byte(attributes), &params); err != nil {
		return nil, fmt.Errorf("attributes: %w", err)
	}
	var objects []struct {
		ObjectName string `json:"objectName"`
	}
	if err := yaml.Unmarshal([]byte(params["objects"]), &objects); err != nil {
		return nil, fmt.Errorf("parameter objects: %w", err)
	}
	names := make([]string, 0, len(objects))
	for _, object := range objects {
		names = append(names, object.ObjectName)
	}
	return names, nil
}

func (p *provider) Mount(_ context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	names, err := wanted(req.GetAttributes())
	if err != nil {
		return nil, err
	}
	var mode int32
	if err := json.Unmarshal([]byte(req.GetPermission()), &mode); err != nil {
		return nil, fmt.Errorf("permission: %w", err)
	}
	raw, err := os.ReadFile(p.secrets)
	if err != nil {
		return nil, err
	}
	var store map[string]secret
	if err := json.Unmarshal(raw, &store); err != nil {
		return nil, fmt.Errorf("%s: %w", p.secrets, err)
	}
	resp := &v1alpha1.MountResponse{}
	for _, name := range names {
		found, ok := store[name]
		if !ok {
			return nil, fmt.Errorf("no object %q in %s", name, p.secrets)
		}
		resp.Files = append(resp.Files, &v1alpha1.File{Path: name, Mode: mode, Contents: []byte(found.Content)})
		resp.ObjectVersion = append(resp.ObjectVersion, &v1alpha1.ObjectVersion{Id: name, Version: found.Version})
	}
	log.Printf("mount %s: %d objects", req.GetTargetPath(), len(names))
	return resp, nil
}

func main() {
	endpoint := flag.String("endpoint", "", "the socket to serve on: <provider volume>/<provider name>.sock")
	secrets := flag.String("secrets", "", "the JSON file of secrets, read at every mount")
	flag.Parse()
	if err := os.Remove(*endpoint); err != nil && !os.IsNotExist(err) {
		log.Fatal(err)
	}
	listener, err := net.Listen("unix", *endpoint)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	v1alpha1.RegisterCSIDriverProviderServer(server, &provider{secrets: *secrets})
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		server.Stop()
	}()
	log.Printf("serving the secrets of %s at %s", *secrets, *endpoint)
	if err := server.Serve(listener); err != nil {
		log.Fatal(err)
	}
	_ = os.Remove(*endpoint)
}
