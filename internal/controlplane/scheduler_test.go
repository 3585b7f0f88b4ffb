package controlplane_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/controlplane/controlplanetest"
)

// TestStartScheduler: kube-scheduler binds a pod to the one node that fits it, and leaves a
// pod that fits no node pending. The apiserver taints a new node not-ready (it has no
// kubelet here, as a node without CNI stays NotReady); the pods tolerate it.
func TestStartScheduler(t *testing.T) {
	c := controlplanetest.Start(t, controlplane.Options{})
	ctx := t.Context()
	_, admin := c.Admin()
	sched, err := c.StartScheduler(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sched.Stop() })
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sched-node"}}
	if node, err = admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	node.Status.Allocatable = node.Status.Capacity
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name, cpu string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}, Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		}}
	}
	for _, p := range []*corev1.Pod{pod("fits", "1"), pod("too-big", "3")} {
		if _, err := admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := sched.Running(); err != nil {
			return false, err
		}
		p, err := admin.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "fits", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "sched-node", nil
	})
	if err != nil {
		t.Fatalf("kube-scheduler did not bind the pod to the node: %v%s", err, sched.Explain())
	}
	p, err := admin.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "too-big", metav1.GetOptions{})
	if err != nil || p.Spec.NodeName != "" {
		t.Errorf("a pod asking for more CPU than the node has was bound to %q (%v)", p.Spec.NodeName, err)
	}
}
