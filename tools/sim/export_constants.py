"""Print the planar model constants of an MJCF model as MuJoCo compiles them, in the units and
coordinates of grove's envs/*.ron (plane coordinates (u, w), angles about the plane normal n).

usage: python3 tools/sim/export_constants.py MODEL.xml [xy|xz]
Used to write the `bodies` and `contacts` sections of envs/*.ron; tools/sim/validate.py checks
the numbers grove compiles (`grove rollout --print-model`) against the same MjModel.
"""
import sys
import numpy as np
import mujoco

def plane(kind):
    if kind == "xy":
        return np.array([1., 0, 0]), np.array([0, 1., 0]), np.array([0, 0, 1.])
    return np.array([1., 0, 0]), np.array([0, 0, 1.]), np.array([0, -1., 0])

def mat(q):
    r = np.zeros(9); mujoco.mju_quat2Mat(r, q); return r.reshape(3, 3)

def body_constants(m, eu, ew, n):
    out = []
    for b in range(1, m.nbody):
        R = mat(m.body_iquat[b]); I = m.body_inertia[b]
        k = int(np.argmax([abs(R[:, i] @ n) for i in range(3)]))
        assert abs(abs(R[:, k] @ n) - 1) < 1e-12, "a principal axis must be the plane normal"
        l, t = [i for i in range(3) if i != k]
        # e_t must be perp(e_l) in the plane: swap l and t if needed
        el = np.array([R[:, l] @ eu, R[:, l] @ ew]); et = np.array([R[:, t] @ eu, R[:, t] @ ew])
        if abs(et @ np.array([-el[1], el[0]])) < 0.5:
            raise SystemExit("unexpected inertia frame")
        Rb = mat(m.body_quat[b]); x = Rb[:, 0]
        out.append(dict(
            name=mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b),
            parent=int(m.body_parentid[b]) - 1,
            pos=(m.body_pos[b] @ eu, m.body_pos[b] @ ew),
            angle=float(np.arctan2(x @ ew, x @ eu)),
            mass=float(m.body_mass[b]),
            com=(m.body_ipos[b] @ eu, m.body_ipos[b] @ ew),
            inertia=(I[l], I[t], I[k]),
            inertia_angle=float(np.arctan2(el[1], el[0])),
        ))
    return out

def main():
    m = mujoco.MjModel.from_xml_path(sys.argv[1])
    eu, ew, n = plane(sys.argv[2] if len(sys.argv) > 2 else "xz")
    for b in body_constants(m, eu, ew, n):
        print(b)
    for j in range(m.njnt):
        print(dict(joint=mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j), body=int(m.jnt_bodyid[j]) - 1,
                   type=int(m.jnt_type[j]), axis=(m.jnt_axis[j] @ eu, m.jnt_axis[j] @ ew, m.jnt_axis[j] @ n),
                   pos=(m.jnt_pos[j] @ eu, m.jnt_pos[j] @ ew), qpos0=float(m.qpos0[m.jnt_qposadr[j]]),
                   range=tuple(m.jnt_range[j]) if m.jnt_limited[j] else None,
                   armature=float(m.dof_armature[m.jnt_dofadr[j]]), damping=float(m.dof_damping[m.jnt_dofadr[j]]),
                   stiffness=float(m.jnt_stiffness[j]), solref=tuple(m.jnt_solref[j]), solimp=tuple(m.jnt_solimp[j])))
    for g in range(m.ngeom):
        if m.geom_type[g] != mujoco.mjtGeom.mjGEOM_CAPSULE:
            continue
        ax = mat(m.geom_quat[g])[:, 2]; hl = m.geom_size[g, 1]; p = m.geom_pos[g]
        a, b = p + hl * ax, p - hl * ax
        print(dict(geom=mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g), body=int(m.geom_bodyid[g]) - 1,
                   ends=((a @ eu, a @ ew), (b @ eu, b @ ew)), radius=float(m.geom_size[g, 0]),
                   contype=int(m.geom_contype[g]), friction=max(m.geom_friction[g, 0], m.geom_friction[0, 0]),
                   margin=float(m.geom_margin[g] + m.geom_margin[0]),
                   solref=tuple(0.5 * (m.geom_solref[g] + m.geom_solref[0])),
                   solimp=tuple(0.5 * (m.geom_solimp[g] + m.geom_solimp[0]))))
    print(dict(timestep=m.opt.timestep, integrator=int(m.opt.integrator), density=m.opt.density,
               viscosity=m.opt.viscosity, gravity=(m.opt.gravity @ eu, m.opt.gravity @ ew),
               floor_w=float(m.geom_pos[0] @ ew)))
    for a in range(m.nu):
        print(dict(actuator=a, joint=int(m.actuator_trnid[a, 0]), gear=float(m.actuator_gear[a, 0]),
                   ctrlrange=tuple(m.actuator_ctrlrange[a])))

if __name__ == "__main__":
    main()
