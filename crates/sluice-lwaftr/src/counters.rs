//! Counters: Snabb's `softwire-state` counters, by Snabb's names, and a
//! Sluice-only block beside them.
//!
//! Contract: [`Snabb`] holds exactly the counters Snabb's lwAFTR keeps (the
//! ones `check` compares, by the names in [`Snabb::NAMES`]); [`Extra`]
//! holds what Sluice counts and Snabb does not (malformed frames, filter
//! drops, VLAN mismatches, hold-queue overflow...), never compared with a
//! Snabb counters file. Replicas are summed with [`Counters::add`].
//! Snabb's `memuse-*` and `next-hop-macaddr-*` leaves are not counters of
//! behaviour and are not kept.

macro_rules! counter_block {
    ($(#[$m:meta])* $name:ident { $($field:ident = $text:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name {
            $(#[doc = $text] pub $field: u64,)*
        }

        impl $name {
            /// Every counter's name, in field order.
            pub const NAMES: &'static [&'static str] = &[$($text),*];

            /// `(name, value)` of every counter, in field order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$(($text, self.$field)),*].into_iter()
            }

            /// The counter called `name`.
            pub fn get(&self, name: &str) -> Option<u64> {
                match name {
                    $($text => Some(self.$field),)*
                    _ => None,
                }
            }

            /// Adds `o`'s counts to these.
            pub fn add(&mut self, o: &$name) {
                $(self.$field += o.$field;)*
            }
        }
    };
}

counter_block! {
    /// Snabb's `softwire-state` counters.
    Snabb {
        drop_all_ipv4_iface_bytes = "drop-all-ipv4-iface-bytes",
        drop_all_ipv4_iface_packets = "drop-all-ipv4-iface-packets",
        drop_all_ipv6_iface_bytes = "drop-all-ipv6-iface-bytes",
        drop_all_ipv6_iface_packets = "drop-all-ipv6-iface-packets",
        drop_bad_checksum_icmpv4_bytes = "drop-bad-checksum-icmpv4-bytes",
        drop_bad_checksum_icmpv4_packets = "drop-bad-checksum-icmpv4-packets",
        drop_in_by_policy_icmpv4_bytes = "drop-in-by-policy-icmpv4-bytes",
        drop_in_by_policy_icmpv4_packets = "drop-in-by-policy-icmpv4-packets",
        drop_in_by_policy_icmpv6_bytes = "drop-in-by-policy-icmpv6-bytes",
        drop_in_by_policy_icmpv6_packets = "drop-in-by-policy-icmpv6-packets",
        drop_in_by_rfc7596_icmpv4_bytes = "drop-in-by-rfc7596-icmpv4-bytes",
        drop_in_by_rfc7596_icmpv4_packets = "drop-in-by-rfc7596-icmpv4-packets",
        drop_ipv4_frag_disabled = "drop-ipv4-frag-disabled",
        drop_ipv4_frag_invalid_reassembly = "drop-ipv4-frag-invalid-reassembly",
        drop_ipv4_frag_random_evicted = "drop-ipv4-frag-random-evicted",
        drop_ipv6_frag_disabled = "drop-ipv6-frag-disabled",
        drop_ipv6_frag_invalid_reassembly = "drop-ipv6-frag-invalid-reassembly",
        drop_ipv6_frag_random_evicted = "drop-ipv6-frag-random-evicted",
        drop_misplaced_not_ipv4_bytes = "drop-misplaced-not-ipv4-bytes",
        drop_misplaced_not_ipv4_packets = "drop-misplaced-not-ipv4-packets",
        drop_misplaced_not_ipv6_bytes = "drop-misplaced-not-ipv6-bytes",
        drop_misplaced_not_ipv6_packets = "drop-misplaced-not-ipv6-packets",
        drop_no_dest_softwire_ipv4_bytes = "drop-no-dest-softwire-ipv4-bytes",
        drop_no_dest_softwire_ipv4_packets = "drop-no-dest-softwire-ipv4-packets",
        drop_no_source_softwire_ipv6_bytes = "drop-no-source-softwire-ipv6-bytes",
        drop_no_source_softwire_ipv6_packets = "drop-no-source-softwire-ipv6-packets",
        drop_out_by_policy_icmpv4_packets = "drop-out-by-policy-icmpv4-packets",
        drop_out_by_policy_icmpv6_packets = "drop-out-by-policy-icmpv6-packets",
        drop_over_mtu_but_dont_fragment_ipv4_bytes = "drop-over-mtu-but-dont-fragment-ipv4-bytes",
        drop_over_mtu_but_dont_fragment_ipv4_packets = "drop-over-mtu-but-dont-fragment-ipv4-packets",
        drop_over_rate_limit_icmpv6_bytes = "drop-over-rate-limit-icmpv6-bytes",
        drop_over_rate_limit_icmpv6_packets = "drop-over-rate-limit-icmpv6-packets",
        drop_over_time_but_not_hop_limit_icmpv6_bytes = "drop-over-time-but-not-hop-limit-icmpv6-bytes",
        drop_over_time_but_not_hop_limit_icmpv6_packets = "drop-over-time-but-not-hop-limit-icmpv6-packets",
        drop_too_big_type_but_not_code_icmpv6_bytes = "drop-too-big-type-but-not-code-icmpv6-bytes",
        drop_too_big_type_but_not_code_icmpv6_packets = "drop-too-big-type-but-not-code-icmpv6-packets",
        drop_ttl_zero_ipv4_bytes = "drop-ttl-zero-ipv4-bytes",
        drop_ttl_zero_ipv4_packets = "drop-ttl-zero-ipv4-packets",
        drop_unknown_protocol_icmpv6_bytes = "drop-unknown-protocol-icmpv6-bytes",
        drop_unknown_protocol_icmpv6_packets = "drop-unknown-protocol-icmpv6-packets",
        drop_unknown_protocol_ipv6_bytes = "drop-unknown-protocol-ipv6-bytes",
        drop_unknown_protocol_ipv6_packets = "drop-unknown-protocol-ipv6-packets",
        hairpin_ipv4_bytes = "hairpin-ipv4-bytes",
        hairpin_ipv4_packets = "hairpin-ipv4-packets",
        in_arp_reply_bytes = "in-arp-reply-bytes",
        in_arp_reply_packets = "in-arp-reply-packets",
        in_arp_request_bytes = "in-arp-request-bytes",
        in_arp_request_packets = "in-arp-request-packets",
        in_icmpv4_echo_bytes = "in-icmpv4-echo-bytes",
        in_icmpv4_echo_packets = "in-icmpv4-echo-packets",
        in_icmpv6_echo_bytes = "in-icmpv6-echo-bytes",
        in_icmpv6_echo_packets = "in-icmpv6-echo-packets",
        in_ipv4_bytes = "in-ipv4-bytes",
        in_ipv4_frag_needs_reassembly = "in-ipv4-frag-needs-reassembly",
        in_ipv4_frag_reassembled = "in-ipv4-frag-reassembled",
        in_ipv4_frag_reassembly_unneeded = "in-ipv4-frag-reassembly-unneeded",
        in_ipv4_packets = "in-ipv4-packets",
        in_ipv6_bytes = "in-ipv6-bytes",
        in_ipv6_frag_needs_reassembly = "in-ipv6-frag-needs-reassembly",
        in_ipv6_frag_reassembled = "in-ipv6-frag-reassembled",
        in_ipv6_frag_reassembly_unneeded = "in-ipv6-frag-reassembly-unneeded",
        in_ipv6_packets = "in-ipv6-packets",
        in_ndp_na_bytes = "in-ndp-na-bytes",
        in_ndp_na_packets = "in-ndp-na-packets",
        in_ndp_ns_bytes = "in-ndp-ns-bytes",
        in_ndp_ns_packets = "in-ndp-ns-packets",
        ingress_packet_drops = "ingress-packet-drops",
        out_arp_reply_bytes = "out-arp-reply-bytes",
        out_arp_reply_packets = "out-arp-reply-packets",
        out_arp_request_bytes = "out-arp-request-bytes",
        out_arp_request_packets = "out-arp-request-packets",
        out_icmpv4_echo_bytes = "out-icmpv4-echo-bytes",
        out_icmpv4_echo_packets = "out-icmpv4-echo-packets",
        out_icmpv4_error_bytes = "out-icmpv4-error-bytes",
        out_icmpv4_error_packets = "out-icmpv4-error-packets",
        out_icmpv6_echo_bytes = "out-icmpv6-echo-bytes",
        out_icmpv6_echo_packets = "out-icmpv6-echo-packets",
        out_icmpv6_error_bytes = "out-icmpv6-error-bytes",
        out_icmpv6_error_packets = "out-icmpv6-error-packets",
        out_ipv4_bytes = "out-ipv4-bytes",
        out_ipv4_frag = "out-ipv4-frag",
        out_ipv4_frag_not = "out-ipv4-frag-not",
        out_ipv4_packets = "out-ipv4-packets",
        out_ipv6_bytes = "out-ipv6-bytes",
        out_ipv6_frag = "out-ipv6-frag",
        out_ipv6_frag_not = "out-ipv6-frag-not",
        out_ipv6_packets = "out-ipv6-packets",
        out_ndp_na_bytes = "out-ndp-na-bytes",
        out_ndp_na_packets = "out-ndp-na-packets",
        out_ndp_ns_bytes = "out-ndp-ns-bytes",
        out_ndp_ns_packets = "out-ndp-ns-packets",
    }
}

counter_block! {
    /// What Sluice counts besides Snabb's counters (never compared by `check`).
    Extra {
        malformed = "sluice-malformed-frames",
        vlan_mismatch = "sluice-vlan-mismatch",
        wrong_port = "sluice-wrong-port",
        ingress_filtered = "sluice-ingress-filtered",
        egress_filtered = "sluice-egress-filtered",
        hold_overflow = "sluice-hold-queue-overflow",
        icmpv4_rate_limited = "sluice-icmpv4-rate-limited",
        ipv4_df_too_big = "sluice-ipv4-fragmenter-df-drop",
        bad_length = "sluice-bad-length",
        ndp_invalid = "sluice-ndp-invalid",
    }
}

/// Both blocks: what a replica reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Snabb's counters.
    pub snabb: Snabb,
    /// Sluice's own.
    pub extra: Extra,
}

impl Counters {
    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &Counters) {
        self.snabb.add(&o.snabb);
        self.extra.add(&o.extra);
    }

    /// The sum of `all`.
    pub fn sum(all: &[Counters]) -> Counters {
        let mut c = Counters::default();
        for o in all {
            c.add(o);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_unique_and_sum() {
        let mut sorted = Snabb::NAMES.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, Snabb::NAMES);
        let mut a = Counters::default();
        a.snabb.in_ipv4_packets = 2;
        let mut b = Counters::default();
        b.snabb.in_ipv4_packets = 3;
        b.extra.malformed = 1;
        let s = Counters::sum(&[a, b]);
        assert_eq!(s.snabb.get("in-ipv4-packets"), Some(5));
        assert_eq!(s.extra.malformed, 1);
    }
}
