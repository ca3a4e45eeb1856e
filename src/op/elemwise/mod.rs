//! Element-wise operators: functions of one array, of two arrays or an array and a
//! scalar, and the sum of many arrays.

pub mod add_n;
pub mod binary;
pub mod unary;
