package webhooks

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The example of the Standard Webhooks specification.
const (
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTS     = 1614265330
	specBody   = `{"test": 2432232314}`
	specSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignSpecVector(t *testing.T) {
	if got := Sign(specSecret, specID, specTS, []byte(specBody)); got != specSig {
		t.Fatalf("Sign = %s, want %s", got, specSig)
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(specTS, 0)
	other := NewSecret()
	two := SignatureHeader(specID, specTS, []byte(specBody), other, specSecret)
	for _, tc := range []struct {
		name, secret, id, ts, body, header string
		now                                time.Time
		want                               error
	}{
		{"spec", specSecret, specID, "1614265330", specBody, specSig, now, nil},
		{"rotation: second of two", specSecret, specID, "1614265330", specBody, two, now, nil},
		{"rotation: first of two", other, specID, "1614265330", specBody, two, now, nil},
		{"unknown version ignored", specSecret, specID, "1614265330", specBody, "v2,xyz " + specSig, now, nil},
		{"body changed", specSecret, specID, "1614265330", `{"test": 2432232315}`, specSig, now, ErrNoMatch},
		{"id changed", specSecret, "msg_other", "1614265330", specBody, specSig, now, ErrNoMatch},
		{"timestamp changed", specSecret, specID, "1614265331", specBody, specSig, now, ErrNoMatch},
		{"wrong secret", NewSecret(), specID, "1614265330", specBody, specSig, now, ErrNoMatch},
		{"v1a not v1", specSecret, specID, "1614265330", specBody, strings.Replace(specSig, "v1,", "v1a,", 1), now, ErrNoMatch},
		{"empty header", specSecret, specID, "1614265330", specBody, "", now, ErrNoMatch},
		{"too old", specSecret, specID, "1614265330", specBody, specSig, now.Add(6 * time.Minute), ErrTimestamp},
		{"too new", specSecret, specID, "1614265330", specBody, specSig, now.Add(-6 * time.Minute), ErrTimestamp},
		{"timestamp not a number", specSecret, specID, "x", specBody, specSig, now, ErrTimestamp},
		{"bad secret prefix", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", specID, "1614265330", specBody, specSig, now, ErrBadSecret},
		{"bad secret base64", "whsec_%%%", specID, "1614265330", specBody, specSig, now, ErrBadSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.secret, tc.id, tc.ts, []byte(tc.body), tc.header, tc.now, DefaultTolerance)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if a == b || !strings.HasPrefix(a, SecretPrefix) {
		t.Fatalf("secrets %q %q", a, b)
	}
	if k, err := key(a); err != nil || len(k) != 32 {
		t.Fatalf("key(%q) = %d bytes, %v", a, len(k), err)
	}
}

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url          string
		allowPrivate bool
		ok           bool
	}{
		{"https://example.com/hook", false, true},
		{"http://example.com:8080/hook?x=1", false, true},
		{"https://93.184.216.34/hook", false, true},
		{"https://[2606:2800:220:1::1]/hook", false, true},
		{"", false, false},
		{"ftp://example.com/", false, false},
		{"example.com/hook", false, false},
		{"https:///hook", false, false},
		{"https://user:pass@example.com/", false, false},
		{"https://user@example.com/", false, false},
		{"https://example.com/#frag", false, false},
		{"https://" + strings.Repeat("a", MaxURLLength) + ".com/", false, false},
		{"http://localhost/", false, false},
		{"http://LOCALHOST./", false, false},
		{"http://api.localhost/", false, false},
		{"http://127.0.0.1/", false, false},
		{"http://127.0.0.1/", true, true},
		{"http://localhost:9000/", true, true},
		{"http://[::1]/", false, false},
		{"http://10.1.2.3/", false, false},
		{"http://172.16.0.1/", false, false},
		{"http://192.168.1.1/", false, false},
		{"http://169.254.169.254/latest/meta-data", false, false},
		{"http://0.0.0.0/", false, false},
		{"http://[::]/", false, false},
		{"http://224.0.0.1/", false, false},
		{"http://100.64.0.1/", false, false},
		{"http://100.127.255.254/", false, false},
		{"http://100.128.0.1/", false, true},
		{"http://[fc00::1]/", false, false},
		{"http://[fe80::1]/", false, false},
		{"http://[::ffff:127.0.0.1]/", false, false},
		{"https://user:pass@example.com/", true, false},
		{"ftp://127.0.0.1/", true, false},
		{"https://example.com/%3Cb%3E?q=a+b&r=(1)", false, true},
		{"https://example.com/a b", false, false},
		{"https://example.com/<b>x</b>", false, false},
		{`https://example.com/"onmouseover="x`, false, false},
		{"https://exämple.com/", false, false},
		{"https://example.com/\x00", false, false},
		{"https://example.com/{a}|^`", false, false},
	} {
		err := CheckURL(tc.url, tc.allowPrivate)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q, %v) = %v, want ok=%v", tc.url, tc.allowPrivate, err, tc.ok)
		}
	}
}

func TestForbidden(t *testing.T) {
	for _, tc := range []struct {
		addr      string
		forbidden bool
	}{
		{"127.0.0.1", true}, {"127.255.0.9", true}, {"::1", true},
		{"10.0.0.1", true}, {"172.31.255.255", true}, {"192.168.0.1", true}, {"fd12::1", true},
		{"169.254.1.1", true}, {"fe80::1", true}, {"0.0.0.0", true}, {"::", true},
		{"224.0.0.1", true}, {"239.1.1.1", true}, {"ff02::1", true},
		{"100.64.0.0", true}, {"100.127.255.255", true}, {"::ffff:10.0.0.1", true},
		{"8.8.8.8", false}, {"172.32.0.1", false}, {"100.63.255.255", false}, {"2001:4860:4860::8888", false},
	} {
		if got := Forbidden(netip.MustParseAddr(tc.addr)); got != tc.forbidden {
			t.Errorf("Forbidden(%s) = %v, want %v", tc.addr, got, tc.forbidden)
		}
	}
}

// The dialer checks the address actually dialed: "localhost" passes CheckURL
// with allowPrivate but the dial to 127.0.0.1 is refused without it.
func TestDialContextRefusesResolvedLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	target := "http://localhost:" + port + "/"

	for _, allow := range []bool{false, true} {
		client := &http.Client{Transport: &http.Transport{DialContext: DialContext(allow, time.Second, nil)}, Timeout: 5 * time.Second}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, target, nil)
		resp, err := client.Do(req)
		if allow {
			if err != nil {
				t.Fatalf("allowPrivate: %v", err)
			}
			resp.Body.Close()
			continue
		}
		if err == nil {
			resp.Body.Close()
			t.Fatal("dial to loopback succeeded")
		}
		if !errors.Is(err, ErrForbiddenAddress) {
			t.Fatalf("err = %v, want ErrForbiddenAddress", err)
		}
	}
}
