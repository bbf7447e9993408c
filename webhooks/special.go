package webhooks

import "net/netip"

// specialPurpose is every entry of the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (iana-ipv4-special-registry, iana-ipv6-special-registry,
// as of 2025), plus multicast and the deprecated IPv6 forms the registries
// no longer list. A delivery reaches none of them.
//
// The registries mark a few entries globally reachable: anycast service
// addresses (PCP, TURN, DNS-SD SRP, AMT, AS112), ORCHIDv2 and DRIP
// identifiers, and the NAT64 well-known prefix. They are refused too: none is
// a host anyone runs an HTTP receiver on, and the translation and tunnel
// prefixes (NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32) embed an
// IPv4 address that may be internal (64:ff9b::a9fe:a9fe is the cloud
// metadata address 169.254.169.254 behind a NAT64 gateway).
var specialPurpose = []netip.Prefix{
	// IPv4 special-purpose registry.
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network" (RFC 791), 0.0.0.0/32 "this host"
	netip.MustParsePrefix("10.0.0.0/8"),      // private use (RFC 1918)
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space, CGNAT (RFC 6598)
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback (RFC 1122)
	netip.MustParsePrefix("169.254.0.0/16"),  // link local, cloud metadata (RFC 3927)
	netip.MustParsePrefix("172.16.0.0/12"),   // private use (RFC 1918)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (RFC 6890), with /29 DS-Lite, .8 dummy, .9 PCP, .10 TURN, .170/.171 NAT64 discovery
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation TEST-NET-1 (RFC 5737)
	netip.MustParsePrefix("192.31.196.0/24"), // AS112-v4 (RFC 7535)
	netip.MustParsePrefix("192.52.193.0/24"), // AMT (RFC 7450)
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast (RFC 7526), .2 6a44 relay (RFC 6751)
	netip.MustParsePrefix("192.168.0.0/16"),  // private use (RFC 1918)
	netip.MustParsePrefix("192.175.48.0/24"), // AS112 direct delegation (RFC 7534)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation TEST-NET-2 (RFC 5737)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation TEST-NET-3 (RFC 5737)
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast (RFC 5771; its own registry)
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved (RFC 1112), with 255.255.255.255/32 limited broadcast (RFC 919)
	// IPv6 special-purpose registry.
	netip.MustParsePrefix("::/96"),             // ::/128 unspecified, ::1/128 loopback (RFC 4291), deprecated IPv4-compatible addresses
	netip.MustParsePrefix("::ffff:0:0/96"),     // IPv4-mapped (RFC 4291)
	netip.MustParsePrefix("64:ff9b::/96"),      // NAT64 well-known prefix (RFC 6052)
	netip.MustParsePrefix("64:ff9b:1::/48"),    // local-use IPv4/IPv6 translation (RFC 8215)
	netip.MustParsePrefix("100::/64"),          // discard-only (RFC 6666)
	netip.MustParsePrefix("100:0:0:1::/64"),    // dummy IPv6 prefix (RFC 9780)
	netip.MustParsePrefix("2001::/23"),         // IETF protocol assignments (RFC 2928): Teredo 2001::/32, PCP/TURN/SRP anycast 2001:1::1-3, benchmarking 2001:2::/48, AMT 2001:3::/32, AS112 2001:4:112::/48, ORCHID 2001:10::/28, ORCHIDv2 2001:20::/28, DRIP 2001:30::/28
	netip.MustParsePrefix("2001:db8::/32"),     // documentation (RFC 3849)
	netip.MustParsePrefix("2002::/16"),         // 6to4 (RFC 3056)
	netip.MustParsePrefix("2620:4f:8000::/48"), // AS112-v6 direct delegation (RFC 7534)
	netip.MustParsePrefix("3fff::/20"),         // documentation (RFC 9637)
	netip.MustParsePrefix("5f00::/16"),         // segment routing SIDs (RFC 9602)
	netip.MustParsePrefix("fc00::/7"),          // unique local (RFC 4193)
	netip.MustParsePrefix("fe80::/10"),         // link-local unicast (RFC 4291)
	netip.MustParsePrefix("fec0::/10"),         // deprecated site-local (RFC 3879)
	netip.MustParsePrefix("ff00::/8"),          // multicast (RFC 4291)
}

// globalUnicast6 is the only IPv6 space IANA allocates for global unicast
// (iana-ipv6-unicast-address-assignments); the rest is reserved by the IETF.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// Forbidden reports whether deliveries must not reach addr unless private
// targets are allowed in configuration: anything but a public unicast
// address. An invalid address and one with a zone (which names a local
// interface, and which netip.Prefix.Contains never matches) are forbidden.
func Forbidden(addr netip.Addr) bool {
	if !addr.IsValid() || addr.Zone() != "" {
		return true
	}
	if addr.Is6() && !globalUnicast6.Contains(addr) {
		return true // also every IPv4-mapped and IPv4-compatible form
	}
	for _, p := range specialPurpose {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
