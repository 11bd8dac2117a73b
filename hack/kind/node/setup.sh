#!/usr/bin/env bash
# Runs inside the node image build (docker build RUN): kind's images/base Dockerfile, minus the
# package installation (debootstrap did it) and the source builds (Debian's containerd, runc and
# CNI plugins are used).
set -euxo pipefail
F=/tmp/kind-files
install -m 0755 $F/usr/local/bin/* /usr/local/bin/
mkdir -p /kind/bin /etc/containerd /etc/default /etc/sysctl.d /etc/systemd/system/kubelet.service.d
cp $F/kind/README.txt /kind/ 2>/dev/null || true
install -m 0755 $F/kind/bin/* /kind/bin/
install -m 0644 $F/etc/crictl.yaml /etc/
install -m 0644 $F/etc/containerd/* /etc/containerd/
install -m 0644 $F/etc/default/* /etc/default/
install -m 0644 $F/etc/sysctl.d/* /etc/sysctl.d/
for f in $F/etc/systemd/system/*; do [ -f "$f" ] && install -m 0644 "$f" /etc/systemd/system/; done
install -m 0644 $F/etc/systemd/system/kubelet.service.d/* /etc/systemd/system/kubelet.service.d/

# kind's units expect containerd in /usr/local/bin and the CNI plugins in /opt/cni/bin.
ln -sf /usr/bin/containerd /usr/local/bin/containerd
ln -sf /usr/bin/containerd-shim-runc-v2 /usr/local/bin/containerd-shim-runc-v2
ln -sf /usr/bin/ctr /usr/local/bin/ctr
mkdir -p /opt/cni
ln -sfn /usr/lib/cni /opt/cni/bin
# Debian's own containerd unit is replaced by kind's.
rm -f /etc/systemd/system/multi-user.target.wants/containerd.service

find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
rm -f /lib/systemd/system/multi-user.target.wants/*
rm -f /etc/systemd/system/*.wants/*
rm -f /lib/systemd/system/local-fs.target.wants/*
rm -f /lib/systemd/system/sockets.target.wants/*udev*
rm -f /lib/systemd/system/sockets.target.wants/*initctl*
rm -f /lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>/etc/systemd/journald.conf
ln -sf /usr/lib/systemd/systemd /sbin/init

systemctl enable kubelet.service
systemctl enable containerd.service
systemctl enable undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests

ctr oci spec |
	jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
	jq 'del(.process.rlimits)' >/etc/containerd/cri-base.json
chmod +x /usr/bin/kubelet /usr/bin/kubeadm /usr/bin/kubectl
kubelet --version
containerd --version
runc --version
