// A stand-in for monis.app/mlog, which the Secrets Store CSI driver's main package uses to set
// up its logs and which the module proxy this project builds from does not serve (wrapper
// ../go.mod replaces it with this). Written here, not copied: the few names the driver calls,
// over klog. Text logs only.
module monis.app/mlog

go 1.25.9

require k8s.io/klog/v2 v2.120.1
