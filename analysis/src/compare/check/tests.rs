//! Unit tests of `check`, kept beside it so the module reads as its logic alone.
use super::*;

fn run(step_ns: i64) -> RunFigures {
    RunFigures {
        steps_total: 4,
        steps_measured: 3,
        warmup_skipped: 1,
        step_p50_ns: Some(step_ns),
        step_mean_ns: Some(step_ns),
        step_min_ns: Some(step_ns),
        step_max_ns: Some(step_ns),
        host_busy_p50_ns: Some(step_ns / 2),
        dataloader_p50_ns: Some(0),
        device_busy_pct: None,
        engine_pct: BTreeMap::new(),
        findings: BTreeMap::new(),
        lost_ns_per_step: BTreeMap::new(),
        op_self_ns_per_step: BTreeMap::new(),
        step_samples_ns: vec![step_ns; 3],
        lost_samples_ns: BTreeMap::new(),
        op_samples_ns: BTreeMap::new(),
        run_step_p50_ns: vec![step_ns],
        rank_spread_pct: None,
        exposed_comm_ns: None,
    }
}

#[test]
fn rank_rules_skip_one_rank_and_hold_the_spread() {
    let base = run(10_000_000);
    let outcome = check(&base, &base, &CheckBudget::default());
    assert_eq!(rule(&outcome, "rank_spread").status, Status::Skipped);
    let mut spread = base.clone();
    spread.rank_spread_pct = Some(8.0);
    let mut wider = base.clone();
    wider.rank_spread_pct = Some(30.0);
    let outcome = check(&spread, &wider, &CheckBudget::default());
    assert_eq!(rule(&outcome, "rank_spread").status, Status::Fail);
    let outcome = check(&spread, &spread, &CheckBudget::default());
    assert_eq!(rule(&outcome, "rank_spread").status, Status::Pass);
    // Exposed comm up 0.6 ms on a 10 ms step: past +10 % and +0.5 ms, but within the 10 %
    // run-to-run noise floor of one baseline run: inconclusive, not a failure.
    let mut exposed = base.clone();
    exposed.exposed_comm_ns = Some(2_000_000);
    let mut more = base;
    more.exposed_comm_ns = Some(2_600_000);
    let outcome = check(&exposed, &more, &CheckBudget::default());
    assert_eq!(rule(&outcome, "exposed_comm").status, Status::Inconclusive);
    more.exposed_comm_ns = Some(4_000_000);
    let outcome = check(&exposed, &more, &CheckBudget::default());
    assert_eq!(rule(&outcome, "exposed_comm").status, Status::Fail);
}

/// A run whose steps are `ms` apart from one another (noisy), median `median_ms`.
fn noisy(median_ms: f64, spread_ms: f64, steps: usize) -> RunFigures {
    let samples: Vec<i64> = (0..steps)
        .map(|i| {
            let offset = (i as f64 / (steps - 1).max(1) as f64 - 0.5) * 2.0 * spread_ms;
            ((median_ms + offset) * 1e6) as i64
        })
        .collect();
    let mut figures = run((median_ms * 1e6) as i64);
    figures.step_samples_ns = samples;
    figures.steps_measured = steps;
    figures
}

#[test]
fn a_change_within_the_noise_is_inconclusive_and_does_not_fail() {
    // +10 % on the median, but steps spread ±50 %: the interval reaches zero.
    let outcome = check(
        &noisy(10.0, 5.0, 6),
        &noisy(11.0, 5.0, 6),
        &CheckBudget::default(),
    );
    let r = rule(&outcome, "step_time");
    assert_eq!(r.status, Status::Inconclusive, "{}", r.message);
    assert!(r.message.contains("profile more steps"), "{}", r.message);
    assert!(r.interval.ends_with("at 99%"), "{}", r.interval);
    assert!(outcome.passed);
    // +20 % with steps ±2 % apart is a regression, past the 10 % run-to-run noise floor.
    let outcome = check(
        &noisy(10.0, 0.2, 6),
        &noisy(12.0, 0.2, 6),
        &CheckBudget::default(),
    );
    assert_eq!(rule(&outcome, "step_time").status, Status::Fail);
    // +10 %, the smallest regression the gate must catch with one baseline run.
    let outcome = check(
        &noisy(10.0, 0.2, 6),
        &noisy(11.0, 0.2, 6),
        &CheckBudget::default(),
    );
    assert_eq!(rule(&outcome, "step_time").status, Status::Fail);
    // +7 % is within the assumed run-to-run noise of a single baseline run …
    let outcome = check(
        &noisy(10.0, 0.2, 6),
        &noisy(10.7, 0.2, 6),
        &CheckBudget::default(),
    );
    let r = rule(&outcome, "step_time");
    assert_eq!(r.status, Status::Inconclusive, "{}", r.message);
    assert!(
        r.message.contains("8.0% run-to-run noise floor"),
        "{}",
        r.message
    );
    // … but not when several baseline runs agree within 1 %.
    let mut runs = vec![
        noisy(10.0, 0.2, 6),
        noisy(10.1, 0.2, 6),
        noisy(10.05, 0.2, 6),
    ];
    for r in &mut runs[1..] {
        r.findings.clear();
    }
    let pooled = RunFigures::pooled(&runs).unwrap();
    assert_eq!(pooled.run_step_p50_ns.len(), 3);
    assert_eq!(pooled.step_samples_ns.len(), 18);
    let outcome = check(&pooled, &noisy(10.8, 0.2, 6), &CheckBudget::default());
    assert_eq!(rule(&outcome, "step_time").status, Status::Fail);
}

#[test]
fn too_few_steps_are_inconclusive() {
    let outcome = check(
        &noisy(10.0, 0.1, 2),
        &noisy(12.0, 0.1, 2),
        &CheckBudget::default(),
    );
    let r = rule(&outcome, "step_time");
    assert_eq!(r.status, Status::Inconclusive);
    assert!(r.message.contains("too few steps"), "{}", r.message);
}

#[test]
fn op_rules_warn_unless_the_budget_makes_them_fail_and_explain_a_slower_step() {
    let mut base = run(10_000_000);
    let mut cur = run(12_000_000);
    base.op_self_ns_per_step
        .insert("aten::mm".into(), 4_000_000);
    cur.op_self_ns_per_step.insert("aten::mm".into(), 5_500_000);
    let outcome = check(&base, &cur, &CheckBudget::default());
    assert_eq!(rule(&outcome, "op_self_time.aten::mm").status, Status::Warn);
    let step = rule(&outcome, "step_time");
    assert_eq!(step.status, Status::Fail);
    assert!(
        step.message
            .contains("grew most: aten::mm +1.50 ms (75% of it)"),
        "{}",
        step.message
    );
    let strict = CheckBudget {
        fail_on_op_rules: true,
        ..CheckBudget::default()
    };
    let outcome = check(&base, &cur, &strict);
    assert_eq!(rule(&outcome, "op_self_time.aten::mm").status, Status::Fail);
}

#[test]
fn op_rules_with_per_step_samples_fail_only_when_the_change_is_significant() {
    let strict = CheckBudget {
        fail_on_op_rules: true,
        ..CheckBudget::default()
    };
    let with_mm = |samples: Vec<i64>| {
        let mut figures = noisy(10.0, 0.2, samples.len());
        figures
            .op_self_ns_per_step
            .insert("aten::mm".into(), samples.iter().sum::<i64>() / 6);
        figures.op_samples_ns.insert("aten::mm".into(), samples);
        figures
    };
    // 2 ms a step, steady, against 3 ms a step: significant, past +20 % and +0.2 ms.
    let base = with_mm(vec![
        2_000_000, 2_050_000, 1_950_000, 2_000_000, 2_020_000, 1_980_000,
    ]);
    let cur = with_mm(vec![
        3_000_000, 3_050_000, 2_950_000, 3_000_000, 3_020_000, 2_980_000,
    ]);
    let r = rule(&check(&base, &cur, &strict), "op_self_time.aten::mm").clone();
    assert_eq!(r.status, Status::Fail, "{}", r.message);
    assert!(r.interval.starts_with("[+"), "{}", r.interval);
    // The same +50 % in the mean, from one step of six that took 5 ms more: within the noise.
    let spiky = with_mm(vec![
        2_000_000, 2_050_000, 1_950_000, 7_000_000, 2_020_000, 1_980_000,
    ]);
    let r = rule(&check(&base, &spiky, &strict), "op_self_time.aten::mm").clone();
    assert_eq!(r.status, Status::Inconclusive, "{}", r.message);
}

fn rule<'a>(outcome: &'a CheckOutcome, name: &str) -> &'a RuleResult {
    outcome
        .rules
        .iter()
        .find(|r| r.rule == name)
        .unwrap_or_else(|| panic!("no rule {name}"))
}

#[test]
fn a_run_against_itself_passes() {
    let outcome = check(&run(10_000_000), &run(10_000_000), &CheckBudget::default());
    assert!(outcome.passed);
    assert_eq!(rule(&outcome, "device_busy").status, Status::Skipped);
}

#[test]
fn both_tolerances_must_be_exceeded() {
    // +5 % and +0.1 ms; no run-to-run noise assumed, to test the tolerances alone.
    let budget = CheckBudget {
        noise_floor_pct: 0.0,
        ..CheckBudget::default()
    };
    // +20 % but only 20 µs: noise on a tiny step.
    let tiny = check(&run(100_000), &run(120_000), &budget);
    assert_eq!(rule(&tiny, "step_time").status, Status::Pass);
    // +1 ms but only 1 %: noise on a long step.
    let long = check(&run(100_000_000), &run(101_000_000), &budget);
    assert_eq!(rule(&long, "step_time").status, Status::Pass);
    // +10 % and +1 ms.
    let slower = check(&run(10_000_000), &run(11_000_000), &budget);
    assert_eq!(rule(&slower, "step_time").status, Status::Fail);
    assert!(!slower.passed);
    assert!(
        rule(&slower, "step_time")
            .message
            .contains("10.0 ms to 11.0 ms")
    );
}

#[test]
fn a_ceiling_fails_on_its_own() {
    let budget = CheckBudget {
        step_time: TimeLimit {
            max_ms: Some(5.0),
            ..TimeLimit::default()
        },
        ..CheckBudget::default()
    };
    let outcome = check(&run(6_000_000), &run(6_000_000), &budget);
    assert_eq!(rule(&outcome, "step_time").status, Status::Fail);
}

#[test]
fn a_new_call_site_fails_unless_allowed() {
    let base = run(10_000_000);
    let mut cur = run(10_000_000);
    cur.findings.insert(
        FindingKey {
            kind: FindingKind::SyncPoint,
            site: "train.py:43".into(),
        },
        crate::compare::figures::FindingGroup {
            findings: 3,
            count: 3,
            lost_ns: 3_000,
            title: "loss.item()".into(),
            severity: crate::finding::Severity::Info,
        },
    );
    cur.lost_ns_per_step.insert(FindingKind::SyncPoint, 1_000);
    let outcome = check(&base, &cur, &CheckBudget::default());
    let new = rule(&outcome, "new_findings.sync_point");
    assert_eq!(new.status, Status::Fail);
    assert!(new.message.contains("sync_point @ train.py:43"));
    // 1 µs per step is inside the lost-time tolerance: only the new site fails.
    assert_eq!(rule(&outcome, "lost_time.sync_point").status, Status::Pass);

    let allowing = CheckBudget {
        allow_new: vec![FindingKind::SyncPoint],
        ..CheckBudget::default()
    };
    assert!(check(&base, &cur, &allowing).passed);
}

#[test]
fn utilization_drops_are_in_points() {
    let mut base = run(10_000_000);
    base.engine_pct.insert("MME".into(), 60.0);
    let mut cur = run(10_000_000);
    cur.engine_pct.insert("MME".into(), 45.0);
    let outcome = check(&base, &cur, &CheckBudget::default());
    let mme = rule(&outcome, "engine_utilization.MME");
    assert_eq!(mme.status, Status::Fail);
    assert_eq!(mme.change, "-15.0 points");
}

#[test]
fn per_name_limits_override_the_default() {
    // The CLI reads the budget from TOML; the JSON form has the same shape.
    let budget: CheckBudget = serde_json::from_value(serde_json::json!({
        "warmup_steps": 2,
        "lost_time": {
            "default": { "max_increase_ms": 2.0 },
            "sync_point": { "max_increase_pct": 1.0 }
        }
    }))
    .unwrap();
    assert_eq!(budget.warmup_steps, 2);
    let limit = budget.lost_limit(FindingKind::SyncPoint);
    assert_eq!(limit.max_increase_ms, Some(2.0));
    assert_eq!(limit.max_increase_pct, Some(1.0));
    assert_eq!(
        budget.lost_limit(FindingKind::Recompile).max_increase_pct,
        Some(10.0)
    );
    assert_eq!(
        budget.lost_limit(FindingKind::Recompile).max_increase_ms,
        Some(2.0)
    );
}

#[test]
fn unknown_budget_keys_are_rejected() {
    let typo = serde_json::json!({ "step_time": { "max_increase_precent": 5.0 } });
    assert!(serde_json::from_value::<CheckBudget>(typo).is_err());
}

/// Two ranks of one DDP run doing identical work: the step got faster, yet one finding's lost
/// time per step went from 1.91 to 6.84 ms, a change of 3 % of the ~160 ms step, under the 8 %
/// run-to-run floor the step rules use. A lost-time rule clears the same floor, as a share of
/// the step, before it fails; past the floor it still fails.
#[test]
fn lost_time_must_clear_the_step_noise_floor() {
    let kind = FindingKind::UnfusedOptimizer;
    let with_lost = |step_ms: f64, lost_ms: f64| {
        let mut r = noisy(step_ms, 2.0, 20);
        r.run_step_p50_ns = vec![(step_ms * 1e6) as i64];
        let per_step = (lost_ms * 1e6) as i64;
        r.lost_ns_per_step.insert(kind, per_step);
        r.lost_samples_ns.insert(
            kind,
            (0..20).map(|i| per_step + (i % 3 - 1) * 10_000).collect(),
        );
        r
    };
    let budget = CheckBudget::default();
    let rule_name = format!("lost_time.{kind}");
    let outcome = check(&with_lost(166.0, 1.91), &with_lost(160.0, 6.84), &budget);
    assert_ne!(rule(&outcome, &rule_name).status, Status::Fail);
    assert!(
        rule(&outcome, &rule_name).message.contains("noise floor"),
        "{}",
        rule(&outcome, &rule_name).message
    );
    // The same finding costing a quarter of the step more: past any floor, a failure.
    let outcome = check(&with_lost(166.0, 1.91), &with_lost(166.0, 45.0), &budget);
    assert_eq!(rule(&outcome, &rule_name).status, Status::Fail);
}
