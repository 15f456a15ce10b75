//! The search's pure parts: the space of evolvable fields and its repair, a
//! TPE sampler, successive-halving rungs with cost accounting in
//! full-evaluation equivalents, line searches and bundles of co-implicated
//! fields, and which moves at a bound already mean "off".
//!
//! Nothing here evaluates a strategy: the loop hands these functions scores
//! and evaluation results, and they return points, plans and verdicts.

mod bound;
mod forest;
mod halving;
mod inert;
mod line;
mod space;
mod tpe;

pub use bound::{BoundState, bound_state, off_value};
pub use forest::{Forest, ForestConfig};
pub use halving::{Halving, Rung, RungPlan, cost_of, ladder, nested_order, plan, promote, successive_halving};
pub use inert::{is_inert, reset_inert};
pub use line::{Move, bundles, invariant_bundle, line_points};
pub use space::{Domain, Param, Point, Repaired, Space, SpaceError, materialize, point_of, repair};
pub use tpe::{Tpe, TpeConfig, Trial, default_weights, gamma, ranked};
