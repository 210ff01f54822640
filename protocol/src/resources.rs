//! [`Resources`]: a vector of named, non-negative, fixed-point amounts.
//!
//! Amounts are held as integer thousandths ("milli-units"), so sums and differences are exact: the
//! books return to zero after every task ends (ARCHITECTURE invariant 4). On the wire an amount is
//! a JSON number in whole units (`{"cpus": 1.5}` is 1500 milli-cpus); more precision than a
//! thousandth is rounded to the nearest thousandth.
//!
//! Zero amounts are never stored, so two vectors are equal exactly when every resource is equal.
//!
//! The amounts are a short list sorted by name: a vector is cloned, summed and dropped on every
//! offer, launch and status update, and holds a handful of names, so one small contiguous
//! allocation (found by binary search) beats a map, which allocated a node of room for eleven
//! entries per clone.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Thousandths per unit.
pub const MILLIS_PER_UNIT: u64 = 1000;

/// The largest amount of one resource accepted on the wire, in units (a billion cores, or a
/// billion MiB of memory). Bigger values are rejected as absurd; the bound also keeps sums over
/// a million agents far from `u64` overflow.
pub const MAX_UNITS: f64 = 1e9;

/// The largest amount of one resource in a *sum* read from the wire, in units: what a role,
/// a framework or the cluster holds over many agents may exceed [`MAX_UNITS`] (2,000 agents of
/// 512 GiB are 1.05e9 MiB), so the operator views' sums are read with [`deserialize_sum`]
/// against this bound instead (1e15 units are 1e18 thousandths, within `u64`).
pub const MAX_SUM_UNITS: f64 = 1e15;

/// The longest resource name.
pub const MAX_NAME_LEN: usize = 32;

/// The most resource names one vector may carry (on the wire and in the text form). A cluster
/// has a handful of kinds; the bound keeps a hostile body from making every later vector long
/// (the coordinator also caps the distinct names in total, see its `max_resource_kinds`).
pub const MAX_NAMES_PER_VECTOR: usize = 32;

/// Why a resource name or amount was rejected. The message names the resource and the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResourceError {
    /// The name does not match `[a-z][a-z0-9_]{0,31}`.
    #[error("invalid resource name {0:?}: use 1 to 32 characters from [a-z0-9_], starting with a letter")]
    BadName(String),
    /// The amount is below zero.
    #[error("resource {name:?}: amount {value} is negative; amounts must be >= 0")]
    Negative {
        /// The resource.
        name: String,
        /// The value given.
        value: f64,
    },
    /// The amount is NaN or infinite.
    #[error("resource {name:?}: amount is not a finite number")]
    NotFinite {
        /// The resource.
        name: String,
    },
    /// The amount is larger than [`MAX_UNITS`] (or [`MAX_SUM_UNITS`] for a sum).
    #[error("resource {name:?}: amount {value:e} is larger than the maximum of {max:e}")]
    TooLarge {
        /// The resource.
        name: String,
        /// The value given.
        value: f64,
        /// The bound it exceeds.
        max: f64,
    },
    /// The amount is not a number at all.
    #[error("resource {name:?}: amount {value} is not a number")]
    NotANumber {
        /// The resource.
        name: String,
        /// The text given.
        value: String,
    },
    /// A textual `name=value,...` list had an item without `=`.
    #[error("invalid resource item {0:?}: expected name=value, e.g. cpus=4,mem=8192")]
    BadItem(String),
    /// The same resource appeared twice.
    #[error("resource {0:?} is given twice")]
    Duplicate(String),
    /// More names than [`MAX_NAMES_PER_VECTOR`].
    #[error("too many resource names: at most 32 per resource vector")]
    TooManyNames,
}

/// A resource name: `[a-z][a-z0-9_]{0,31}`.
///
/// Shared, not owned: resource vectors are cloned on every offer, launch and status, so a clone
/// only counts a reference, and the common names (`cpus`, `mem`, `disk`, `gpus`, `ports`) are
/// made once per process rather than on every parse.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceName(Arc<str>);

/// The names most vectors hold, each allocated once (see [`ResourceName`]).
const COMMON_NAMES: [&str; 5] = ["cpus", "mem", "disk", "gpus", "ports"];

fn common_name(name: &str) -> Option<Arc<str>> {
    static COMMON: OnceLock<[Arc<str>; COMMON_NAMES.len()]> = OnceLock::new();
    let i = COMMON_NAMES.iter().position(|n| *n == name)?;
    let all = COMMON.get_or_init(|| COMMON_NAMES.map(Arc::from));
    Some(Arc::clone(&all[i]))
}

impl ResourceName {
    /// Validates a resource name.
    pub fn new(name: impl Into<String> + AsRef<str>) -> Result<Self, ResourceError> {
        if let Some(common) = common_name(name.as_ref()) {
            return Ok(Self(common));
        }
        let name = name.into();
        let mut chars = name.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
        let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !first_ok || !rest_ok || name.len() > MAX_NAME_LEN {
            return Err(ResourceError::BadName(name));
        }
        Ok(Self(Arc::from(name)))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// Converts a wire amount (units, a float) to thousandths, validating it.
pub fn units_to_millis(name: &str, value: f64) -> Result<u64, ResourceError> {
    bounded_units_to_millis(name, value, MAX_UNITS)
}

/// [`units_to_millis`] with the bound `max` (at most [`MAX_SUM_UNITS`]).
fn bounded_units_to_millis(name: &str, value: f64, max: f64) -> Result<u64, ResourceError> {
    if !value.is_finite() {
        return Err(ResourceError::NotFinite { name: name.into() });
    }
    if value < 0.0 {
        return Err(ResourceError::Negative {
            name: name.into(),
            value,
        });
    }
    if value > max {
        return Err(ResourceError::TooLarge {
            name: name.into(),
            value,
            max,
        });
    }
    // In range [0, 1e18], so the cast cannot overflow `u64`.
    Ok((value * MILLIS_PER_UNIT as f64).round() as u64)
}

/// A vector of named resource amounts, in thousandths. See the module docs.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// Sorted by name, each name once, no zero amount (so derived equality is equality).
    amounts: Vec<(ResourceName, u64)>,
}

impl Resources {
    /// The empty vector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a vector from `(name, units)` pairs, e.g. `[("cpus", 2.0), ("mem", 4096.0)]`.
    pub fn from_units<'a>(
        pairs: impl IntoIterator<Item = (&'a str, f64)>,
    ) -> Result<Self, ResourceError> {
        let mut out = Self::new();
        for (name, value) in pairs {
            let name = ResourceName::new(name)?;
            let millis = units_to_millis(name.as_str(), value)?;
            if out.find(name.as_str()).is_ok() {
                return Err(ResourceError::Duplicate(name.as_str().to_owned()));
            }
            out.set_millis(name, millis);
        }
        Ok(out)
    }

    /// Where `name` is (`Ok`) or would go (`Err`) in the sorted list.
    fn find(&self, name: &str) -> Result<usize, usize> {
        self.amounts.binary_search_by(|(n, _)| n.as_str().cmp(name))
    }

    /// Sets one resource's amount in thousandths (zero removes it).
    pub fn set_millis(&mut self, name: ResourceName, millis: u64) {
        match (self.find(name.as_str()), millis) {
            (Ok(i), 0) => {
                self.amounts.remove(i);
            }
            (Ok(i), m) => self.amounts[i].1 = m,
            (Err(_), 0) => {}
            (Err(i), m) => self.amounts.insert(i, (name, m)),
        }
    }

    /// One resource's amount in thousandths (zero when absent).
    pub fn millis(&self, name: &str) -> u64 {
        self.find(name).map_or(0, |i| self.amounts[i].1)
    }

    /// One resource's amount in units.
    pub fn units(&self, name: &str) -> f64 {
        self.millis(name) as f64 / MILLIS_PER_UNIT as f64
    }

    /// The non-zero amounts, in thousandths, by name order.
    pub fn iter(&self) -> impl Iterator<Item = (&ResourceName, u64)> + '_ {
        self.amounts.iter().map(|(n, v)| (n, *v))
    }

    /// The names of the non-zero resources.
    pub fn names(&self) -> impl Iterator<Item = &ResourceName> + '_ {
        self.amounts.iter().map(|(n, _)| n)
    }

    /// True when every amount is zero.
    pub fn is_empty(&self) -> bool {
        self.amounts.is_empty()
    }

    /// `self + other`, saturating at `u64::MAX` (unreachable with validated inputs).
    pub fn add(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.add_assign(other);
        out
    }

    /// `self += other`.
    pub fn add_assign(&mut self, other: &Resources) {
        for (name, v) in &other.amounts {
            match self.find(name.as_str()) {
                Ok(i) => self.amounts[i].1 = self.amounts[i].1.saturating_add(*v),
                Err(i) => self.amounts.insert(i, (name.clone(), *v)),
            }
        }
    }

    /// `self - other`, or `None` if any resource of `other` exceeds `self`'s.
    pub fn checked_sub(&self, other: &Resources) -> Option<Resources> {
        let mut out = self.clone();
        for (name, v) in &other.amounts {
            let left = out.millis(name.as_str()).checked_sub(*v)?;
            out.set_millis(name.clone(), left);
        }
        Some(out)
    }

    /// `self - other`, each resource floored at zero.
    pub fn saturating_sub(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        for (name, v) in &other.amounts {
            let left = out.millis(name.as_str()).saturating_sub(*v);
            out.set_millis(name.clone(), left);
        }
        out
    }

    /// True when every resource of `self` is at most the same resource of `other`.
    pub fn fits_in(&self, other: &Resources) -> bool {
        self.amounts
            .iter()
            .all(|(name, v)| other.millis(name.as_str()) >= *v)
    }

    /// The dominant share of `self` against `total`: `max_j self_j / total_j` over the resources
    /// of `total`. A resource that `total` lacks is ignored.
    pub fn dominant_share(&self, total: &Resources) -> f64 {
        self.amounts
            .iter()
            .filter_map(|(name, v)| {
                let t = total.millis(name.as_str());
                (t > 0).then(|| *v as f64 / t as f64)
            })
            .fold(0.0, f64::max)
    }
}

/// Collects `(name, millis)` pairs as [`Resources::set_millis`] one after another would (a zero
/// amount removes the name, a name given again keeps its last amount), in one allocation when
/// the pairs come sorted by name, each once and none zero.
impl FromIterator<(ResourceName, u64)> for Resources {
    fn from_iter<I: IntoIterator<Item = (ResourceName, u64)>>(pairs: I) -> Self {
        let amounts: Vec<(ResourceName, u64)> = pairs.into_iter().collect();
        let sorted = amounts.windows(2).all(|w| w[0].0 < w[1].0);
        if sorted && amounts.iter().all(|(_, m)| *m > 0) {
            return Self { amounts };
        }
        let mut out = Self::new();
        for (name, millis) in amounts {
            out.set_millis(name, millis);
        }
        out
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// Formats as `cpus=2,mem=4096` (the same syntax [`str::parse`] accepts).
impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, v)) in self.amounts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}={}", *v as f64 / MILLIS_PER_UNIT as f64)?;
        }
        Ok(())
    }
}

/// Parses `cpus=4,mem=8192,gpus=1` (for command lines).
impl std::str::FromStr for Resources {
    type Err = ResourceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut pairs = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| ResourceError::BadItem(item.into()))?;
            let (name, value) = (name.trim(), value.trim());
            let parsed: f64 = value.parse().map_err(|_| ResourceError::NotANumber {
                name: name.into(),
                value: value.into(),
            })?;
            if pairs.len() == MAX_NAMES_PER_VECTOR {
                return Err(ResourceError::TooManyNames);
            }
            pairs.push((name, parsed));
        }
        Resources::from_units(pairs)
    }
}

impl Serialize for Resources {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.amounts.len()))?;
        for (name, v) in &self.amounts {
            if v % MILLIS_PER_UNIT == 0 {
                map.serialize_entry(name.as_str(), &(v / MILLIS_PER_UNIT))?;
            } else {
                map.serialize_entry(name.as_str(), &(*v as f64 / MILLIS_PER_UNIT as f64))?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Resources {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ResourcesVisitor { max: MAX_UNITS })
    }
}

/// On the wire a [`Resources`] is a JSON object of names to non-negative amounts, e.g.
/// `{"cpus": 2, "mem": 1024}`: written by hand here, since its `Serialize` is.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Resources {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, SchemaType, Type};
        let amount = ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::Number))
            .minimum(Some(0.0));
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::Object))
            .description(Some(
                "Named resource amounts, e.g. {\"cpus\": 2, \"mem\": 1024, \"gpus\": 1}; \
                 amounts are read to a thousandth of a unit.",
            ))
            .additional_properties(Some(AdditionalProperties::RefOr(amount.into())))
            .max_properties(Some(MAX_NAMES_PER_VECTOR))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Resources {
    fn name() -> std::borrow::Cow<'static, str> {
        "Resources".into()
    }
}

/// Reads a [`Resources`] that is a sum over agents (a role's `allocated`, a framework's `used`
/// and `offered`), whose amounts may exceed [`MAX_UNITS`] up to [`MAX_SUM_UNITS`]. For
/// `#[serde(deserialize_with = "...")]` on response fields; requests keep the strict bound.
pub fn deserialize_sum<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Resources, D::Error> {
    deserializer.deserialize_map(ResourcesVisitor { max: MAX_SUM_UNITS })
}

/// The visitor of both bounds.
struct ResourcesVisitor {
    max: f64,
}

impl<'de> Visitor<'de> for ResourcesVisitor {
    type Value = Resources;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object from resource name to a non-negative number")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Resources, A::Error> {
        let mut out = Resources::new();
        let mut seen = std::collections::BTreeSet::new();
        while let Some(name) = access.next_key::<String>()? {
            // Refused at the first name too many, before reading the rest.
            if seen.len() == MAX_NAMES_PER_VECTOR {
                return Err(serde::de::Error::custom(ResourceError::TooManyNames));
            }
            let value: serde_json::Value = access.next_value()?;
            let name = ResourceName::new(name).map_err(serde::de::Error::custom)?;
            let number = value.as_f64().ok_or_else(|| {
                serde::de::Error::custom(ResourceError::NotANumber {
                    name: name.as_str().to_owned(),
                    value: value.to_string(),
                })
            })?;
            let millis = bounded_units_to_millis(name.as_str(), number, self.max)
                .map_err(serde::de::Error::custom)?;
            if !seen.insert(name.clone()) {
                return Err(serde::de::Error::custom(ResourceError::Duplicate(
                    name.as_str().to_owned(),
                )));
            }
            out.set_millis(name, millis);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn r(s: &str) -> Resources {
        s.parse().unwrap()
    }

    #[test]
    fn arithmetic_is_exact() {
        let mut acc = Resources::new();
        for _ in 0..10 {
            acc.add_assign(&r("cpus=0.1"));
        }
        assert_eq!(acc, r("cpus=1"));
        for _ in 0..10 {
            acc = acc.checked_sub(&r("cpus=0.1")).unwrap();
        }
        assert!(acc.is_empty(), "books must return to zero, got {acc}");
    }

    #[test]
    fn checked_sub_refuses_to_go_negative() {
        assert_eq!(r("cpus=1").checked_sub(&r("cpus=2")), None);
        assert_eq!(r("cpus=1").checked_sub(&r("mem=1")), None);
        assert_eq!(
            r("cpus=3,mem=2").checked_sub(&r("cpus=1")),
            Some(r("cpus=2,mem=2"))
        );
        assert_eq!(
            r("cpus=1").saturating_sub(&r("cpus=2,mem=1")),
            Resources::new()
        );
    }

    #[test]
    fn fits_in() {
        assert!(r("cpus=1").fits_in(&r("cpus=1,mem=2")));
        assert!(!r("cpus=1,gpus=1").fits_in(&r("cpus=1,mem=2")));
        assert!(Resources::new().fits_in(&Resources::new()));
    }

    #[test]
    fn dominant_share_ignores_missing_totals() {
        let total = r("cpus=9,mem=18");
        assert!((r("cpus=3,mem=12").dominant_share(&total) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(r("gpus=1").dominant_share(&total), 0.0);
    }

    #[test]
    fn wire_format_round_trips_and_rounds() {
        let parsed: Resources =
            serde_json::from_str(r#"{"cpus": 1.5, "mem": 4096, "disk": 0.0004}"#).unwrap();
        assert_eq!(parsed.millis("cpus"), 1500);
        assert_eq!(
            parsed.millis("disk"),
            0,
            "below a thousandth rounds to zero"
        );
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            r#"{"cpus":1.5,"mem":4096}"#
        );
    }

    #[test]
    fn bad_input_names_the_field() {
        let cases = [
            (r#"{"cpus": -1}"#, "\"cpus\": amount -1 is negative"),
            (r#"{"mem": 1e300}"#, "\"mem\": amount 1e300 is larger"),
            (r#"{"Cpus": 1}"#, "invalid resource name \"Cpus\""),
            (r#"{"cpus": "x"}"#, "\"cpus\": amount \"x\" is not a number"),
            (r#"{"cpus": 1, "cpus": 2}"#, "given twice"),
        ];
        for (json, want) in cases {
            let err = serde_json::from_str::<Resources>(json)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{json}: {err}");
        }
        assert!(matches!(
            units_to_millis("cpus", f64::NAN),
            Err(ResourceError::NotFinite { .. })
        ));
        assert!(matches!(
            units_to_millis("cpus", f64::INFINITY),
            Err(ResourceError::NotFinite { .. })
        ));
        assert!("cpus".parse::<Resources>().is_err());
        assert!("cpus=abc".parse::<Resources>().is_err());
    }

    #[test]
    fn names_per_vector_are_capped() {
        let at_limit: String = (0..MAX_NAMES_PER_VECTOR)
            .map(|i| format!("\"r{i}\": 1"))
            .collect::<Vec<_>>()
            .join(",");
        let ok: Resources = serde_json::from_str(&format!("{{{at_limit}}}")).unwrap_or_default();
        assert_eq!(ok.names().count(), MAX_NAMES_PER_VECTOR);
        let over = format!("{{{at_limit}, \"extra\": 1}}");
        let err = serde_json::from_str::<Resources>(&over)
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("too many resource names")),
            "{err:?}"
        );
        // 75k names: refused at the 33rd, without reading the rest.
        let huge: String = (0..75_000)
            .map(|i| format!("\"n{i}\": 1"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(serde_json::from_str::<Resources>(&format!("{{{huge}}}")).is_err());
        let text: String = (0..=MAX_NAMES_PER_VECTOR)
            .map(|i| format!("r{i}=1"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(text.parse::<Resources>(), Err(ResourceError::TooManyNames));
    }

    /// More names than most vectors hold, in no particular order.
    const MODEL_NAMES: [&str; 6] = ["mem", "cpus", "zeta", "gpus", "alpha", "disk"];

    fn vector_and_model() -> impl Strategy<Value = (Resources, BTreeMap<String, u64>)> {
        proptest::collection::vec((0..MODEL_NAMES.len(), 0u64..5), 0..8).prop_map(|items| {
            let mut res = Resources::new();
            let mut model = BTreeMap::new();
            for (i, v) in items {
                let name = MODEL_NAMES[i];
                res.set_millis(ResourceName::new(name).unwrap(), v);
                if v == 0 {
                    model.remove(name);
                } else {
                    model.insert(name.to_owned(), v);
                }
            }
            (res, model)
        })
    }

    fn as_model(res: &Resources) -> BTreeMap<String, u64> {
        res.iter()
            .map(|(n, v)| (n.as_str().to_owned(), v))
            .collect()
    }

    proptest! {
        /// The sorted list behaves as a map from name to non-zero amount: every operation
        /// agrees with one, iteration is in name order, and equal maps are equal vectors.
        #[test]
        fn the_vector_agrees_with_a_map((a, ma) in vector_and_model(), (b, mb) in vector_and_model()) {
            prop_assert_eq!(as_model(&a), ma.clone());
            let names: Vec<&str> = a.names().map(|n| n.as_str()).collect();
            prop_assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");

            let mut sum_model = ma.clone();
            for (n, v) in &mb {
                *sum_model.entry(n.clone()).or_insert(0) += v;
            }
            prop_assert_eq!(as_model(&a.add(&b)), sum_model);

            let checked = mb.iter().try_fold(ma.clone(), |mut m, (n, v)| {
                let left = m.get(n).copied().unwrap_or(0).checked_sub(*v)?;
                if left == 0 { m.remove(n); } else { m.insert(n.clone(), left); }
                Some(m)
            });
            prop_assert_eq!(a.checked_sub(&b).map(|r| as_model(&r)), checked);

            let mut floor = ma.clone();
            for (n, v) in &mb {
                let left = floor.get(n).copied().unwrap_or(0).saturating_sub(*v);
                if left == 0 { floor.remove(n); } else { floor.insert(n.clone(), left); }
            }
            prop_assert_eq!(as_model(&a.saturating_sub(&b)), floor);

            let fits = ma.iter().all(|(n, v)| mb.get(n).is_some_and(|have| have >= v));
            prop_assert_eq!(a.fits_in(&b), fits);
            prop_assert_eq!(a == b, ma == mb);
            for name in MODEL_NAMES {
                prop_assert_eq!(a.millis(name), ma.get(name).copied().unwrap_or(0));
            }
        }
    }

    proptest! {
        /// Collecting pairs builds the vector that setting them one by one does, sorted or not,
        /// with repeats and zeros.
        #[test]
        fn collecting_is_setting_one_by_one(
            items in proptest::collection::vec((0..MODEL_NAMES.len(), 0u64..4), 0..8),
            sort in any::<bool>(),
        ) {
            let mut pairs: Vec<(ResourceName, u64)> = items
                .iter()
                .map(|&(i, v)| (ResourceName::new(MODEL_NAMES[i]).unwrap(), v))
                .collect();
            if sort {
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
            }
            let mut one_by_one = Resources::new();
            for (n, v) in pairs.clone() {
                one_by_one.set_millis(n, v);
            }
            prop_assert_eq!(pairs.into_iter().collect::<Resources>(), one_by_one);
        }
    }

    #[test]
    fn text_form_round_trips() {
        let res = r("cpus=4, mem=8192,gpus=1");
        assert_eq!(res.to_string(), "cpus=4,gpus=1,mem=8192");
        assert_eq!(r(&res.to_string()), res);
    }
}
