// Command registrar registers a CSI driver with the kubelet, as node-driver-registrar does:
// it asks the driver its name (CSI Identity GetPluginInfo), then serves the kubelet's plugin
// registration API (k8s.io/kubelet pluginregistration/v1) on a socket in the kubelet's
// plugins_registry directory. The kubelet finds the socket, calls GetInfo, connects to the
// driver's endpoint itself, and reports back with NotifyRegistrationStatus. A refused
// registration ends the process with exit code 1, as it ends node-driver-registrar.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type registrar struct {
	driver   string
	endpoint string
}

func (r registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	log.Printf("kubelet asked for the plugin info of %s", r.driver)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driver,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r registrar) NotifyRegistrationStatus(_ context.Context, status *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !status.PluginRegistered {
		log.Printf("the kubelet refused %s: %s", r.driver, status.Error)
		os.Exit(1)
	}
	log.Printf("the kubelet registered %s", r.driver)
	return &registerapi.RegistrationStatusResponse{}, nil
}

// driverName asks the CSI driver at socket for its name, retrying until it serves.
func driverName(socket string, timeout time.Duration) (string, error) {
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil {
			return info.GetName(), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the driver at %s did not answer GetPluginInfo: %w", socket, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func main() {
	csiAddress := flag.String("csi-address", "", "the CSI driver's socket (a path)")
	kubeletPath := flag.String("kubelet-registration-path", "", "the driver's socket as the kubelet reaches it (default: --csi-address)")
	registry := flag.String("plugin-registration-path", "/var/lib/kubelet/plugins_registry", "the kubelet's plugin registration directory")
	timeout := flag.Duration("timeout", 30*time.Second, "how long to wait for the driver to answer")
	flag.Parse()
	if *kubeletPath == "" {
		*kubeletPath = *csiAddress
	}
	name, err := driverName(*csiAddress, *timeout)
	if err != nil {
		log.Fatal(err)
	}
	socket := filepath.Join(*registry, name+"-reg.sock")
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		log.Fatal(err)
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	registerapi.RegisterRegistrationServer(server, registrar{driver: name, endpoint: *kubeletPath})
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		server.Stop()
	}()
	log.Printf("serving the registration of %s (endpoint %s) at %s", name, *kubeletPath, socket)
	if err := server.Serve(listener); err != nil {
		log.Fatal(err)
	}
	_ = os.Remove(socket) // the kubelet deregisters the driver when its socket goes
}
